"""Credential and certificate files are read only up to 1 MiB: a path set by mistake to a
large file or a device (``/dev/zero`` never ends) is a clear error naming the setting, not a
hang or a process that fills the memory."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from forecaster.exceptions import ConfigError
from training.config import BasicAuth, PrometheusSourceConfig
from training.sources import make_source
from training.sources.files import SMALL_FILE_LIMIT, read_small

LARGE = "larger than 1,048,576 bytes"


def _large(tmp_path: Path) -> Path:
    path = tmp_path / "large"
    with path.open("wb") as file:  # sparse: no disk is filled
        file.truncate(SMALL_FILE_LIMIT + 1)
    return path


def test_a_file_at_the_limit_is_read_whole_and_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "exact"
    path.write_bytes(b"x" * SMALL_FILE_LIMIT)
    assert read_small(path) == b"x" * SMALL_FILE_LIMIT
    with pytest.raises(OSError) as caught:
        read_small(_large(tmp_path))
    assert caught.value.errno == errno.EFBIG
    assert LARGE in str(caught.value.strerror)


def test_an_endless_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=LARGE):
        read_small(Path("/dev/zero"))


@pytest.mark.parametrize("field", ["bearer_token_file", "basic_auth.password_file"])
@pytest.mark.parametrize("where", ["large", "/dev/zero"])
def test_a_prometheus_credential_file_too_large_names_its_field(
    tmp_path: Path, field: str, where: str
) -> None:
    path = _large(tmp_path) if where == "large" else Path(where)
    if field == "bearer_token_file":
        config = PrometheusSourceConfig(
            type="prometheus", url="http://127.0.0.1:9", bearer_token_file=path
        )
    else:
        auth = BasicAuth(username="prewarm", password_file=path)
        config = PrometheusSourceConfig(
            type="prometheus", url="http://127.0.0.1:9", basic_auth=auth
        )
    with pytest.raises(ConfigError) as caught:
        make_source("prometheus", config)
    message = str(caught.value)
    assert message.startswith(f"`{field}` {str(path)!r} cannot be read: ")
    assert LARGE in message


def test_a_prometheus_credential_file_that_is_not_text_names_its_field(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_bytes(b"\xff\xfe secret")
    config = PrometheusSourceConfig(
        type="prometheus", url="http://127.0.0.1:9", bearer_token_file=path
    )
    with pytest.raises(ConfigError) as caught:
        make_source("prometheus", config)
    assert str(caught.value) == f"`bearer_token_file` {str(path)!r} cannot be read: not UTF-8 text"
