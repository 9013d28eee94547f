"""Any input to the CSV reader or the config loader gives a valid result or a clear error: a
prewarm exception with a bounded message, never another exception type."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecaster.exceptions import PrewarmError
from training.config import TrainConfig, load_config, parse_config
from training.sources.file import read_series

# A line has room for the sentence around the echoes: a field path and one value, or five
# rows each with a label and a value of at most 40 characters; a message for a few lines (a
# config lists at most ten fields). Far below what an unbounded echo of these inputs (values
# of 5,000 characters, any number of bad fields or rows) would give.
LONGEST_LINE = 700
LONGEST_MESSAGE = 4000
PROPERTY = settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def outcome(call: Any) -> Any:
    """``call()``'s result, or its prewarm error after checking the message is bounded."""
    try:
        return call()
    except PrewarmError as exc:
        message = str(exc)
        assert message, "an error says what is wrong"
        assert len(message) <= LONGEST_MESSAGE, message[:300]
        assert max(len(line) for line in message.splitlines()) <= LONGEST_LINE, message[:300]
        return exc


def written(data: bytes, suffix: str) -> Any:
    folder = Path(tempfile.mkdtemp())
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    return path


# -- the CSV reader ----------------------------------------------------------------------------

TOKENS = st.one_of(
    st.sampled_from(
        ["2025-01-01T00:00:00Z", "2025-01-01 00:05", "1735689600", "1e308", "-1", "nan", "inf",
         "", "x" * 300, "99999999999999999999", "2262-04-12", "chat", '"a,b"', "1e15", "0"]
    ),
    st.floats(allow_nan=True).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.text(max_size=20),
)  # fmt: skip
HEADERS = st.lists(
    st.sampled_from(["timestamp", "value", "series", "time", "y", "ds", "workload", "x" * 200, ""]),
    min_size=1,
    max_size=4,
)


@st.composite
def csv_text(draw: st.DrawFn) -> bytes:
    header = draw(HEADERS)
    rows = draw(st.lists(st.lists(TOKENS, min_size=1, max_size=5), max_size=30))
    lines = [",".join(header), *(",".join(row) for row in rows)]
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def check_frame(result: Any) -> None:
    if isinstance(result, PrewarmError):
        return
    assert isinstance(result, pd.DataFrame)
    assert list(result.columns)[:3] == ["series", "timestamp", "value"]
    assert (result["value"].dropna().abs() < 1e12).all()


@PROPERTY
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    check_frame(outcome(lambda: read_series(written(data, ".csv"))))


@PROPERTY
@given(csv_text())
def test_random_csv_text(data: bytes) -> None:
    check_frame(outcome(lambda: read_series(written(data, ".csv"))))


# -- the config loader -------------------------------------------------------------------------

KEYS = st.sampled_from(
    ["source", "workloads", "type", "url", "files", "path", "step", "lookback", "name",
     "capacity", "capacity_per_replica", "cold_start", "max_replicas", "min_replicas", "policy",
     "quantile", "serving", "max_staleness", "refresh_interval", "model", "params", "features",
     "evaluation", "window", "training", "on_workload_failure", "mlflow", "kind", "seconds",
     "x" * 300]
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["prometheus", "file", "replay", "5m", "0", "chat", "http://u:p@h:9090",
                     "lightgbm", "skip", "fail", "x" * 5000]),
    st.text(max_size=30),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)
WORKLOAD = st.fixed_dictionaries(
    {"name": st.sampled_from(["chat", "code", "Bad Name"])},
    optional={"capacity": st.dictionaries(KEYS, VALUES, max_size=4), "demand": SCALARS},
)
DOCUMENTS = st.fixed_dictionaries(
    {
        "source": st.one_of(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["prometheus", "file", "replay", "nope"])},
                optional={"url": SCALARS, "path": SCALARS, "step": SCALARS, "files": VALUES},
            ),
            VALUES,
        ),
        "workloads": st.lists(WORKLOAD, max_size=3) | VALUES,
    },
    optional={key: VALUES for key in ("serving", "model", "evaluation", "training", "gate")},
)


def check_config(result: Any) -> None:
    assert isinstance(result, TrainConfig | PrewarmError)


@PROPERTY
@given(st.text(max_size=500))
def test_random_yaml_text(text: str) -> None:
    path = written(text.encode("utf-8", "surrogatepass"), ".yaml")
    check_config(outcome(lambda: load_config(path)))


@PROPERTY
@given(VALUES)
def test_random_yaml_values(value: Any) -> None:
    check_config(outcome(lambda: parse_config(value)))


@PROPERTY
@given(DOCUMENTS)
def test_random_config_documents(document: dict[str, Any]) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    path = written(text.encode("utf-8", "surrogatepass"), ".yaml")
    check_config(outcome(lambda: load_config(path)))
