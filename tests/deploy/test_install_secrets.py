"""The commands of docs/install.md that make Secrets, run as written against a stand-in
``kubectl``: each Secret gets the keys its TriggerAuthentication reads and the values of the
install's own Secrets, and no secret value is ever an argument of a process (visible to
every user in ``ps``), only piped or in files of mode 0600 in a private folder that is
removed afterwards."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prewarm.manifests import BEARER, GRPC, TriggerAuth
from tests.deploy.rendered import ROOT

INSTALL_MD = ROOT / "docs" / "install.md"
# A stand-in for kubectl: logs its arguments; `get secret S -o jsonpath={.data.K}` answers a
# known value of S's key K; `create secret` runs the real kubectl client-side (it builds the
# Secret without a cluster) and records the Secret and the mode of each file it read.
FAKE_KUBECTL = """#!{python}
import base64, json, os, stat, subprocess, sys
args = sys.argv[1:]
with open(os.environ["KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if "get" in args and "secret" in args:
    name = args[args.index("secret") + 1]
    path = next(a for a in args if a.startswith("jsonpath="))
    key = path.removeprefix("jsonpath={{.data.").removesuffix("}}").replace("\\\\.", ".")
    sys.stdout.write(base64.b64encode(f"{{name}}/{{key}} value".encode()).decode())
elif "create" in args and "secret" in args:
    files = [a.split("=", 2)[2] for a in args if a.startswith("--from-file=")]
    mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
    modes = {{f: [mode(f), mode(os.path.dirname(f))] for f in files if not f.startswith("/dev/")}}
    done = subprocess.run([os.environ["REAL_KUBECTL"], *args, "--dry-run=client", "-o", "json"],
                          capture_output=True, text=True, check=True)
    with open(os.environ["KUBECTL_MADE"], "a") as made:
        made.write(json.dumps({{"secret": json.loads(done.stdout), "modes": modes}}) + "\\n")
"""


def _blocks() -> list[str]:
    """The sh blocks of install.md that create a Secret."""
    blocks = re.findall(r"```sh\n(.*?)```", INSTALL_MD.read_text(), re.DOTALL)
    return [b for b in blocks if "create secret generic" in b]


def _run(block: str, tmp_path: Path) -> tuple[list[list[str]], list[dict[str, Any]]]:
    """``block`` under bash with the stand-in kubectl: (every kubectl argv, what it made)."""
    real = shutil.which("kubectl")
    if real is None:
        pytest.fail("kubectl is needed to build the Secrets (kubectl create --dry-run=client)")
    bin_dir, temp = tmp_path / "bin", tmp_path / "tmp"
    bin_dir.mkdir()
    temp.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL.format(python=sys.executable))
    kubectl.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(temp),
        "KUBECTL_LOG": str(tmp_path / "argv.jsonl"),
        "KUBECTL_MADE": str(tmp_path / "made.jsonl"),
        "REAL_KUBECTL": real,
    }
    subprocess.run(["bash", "-c", block], env=env, check=True, timeout=120, cwd=tmp_path)
    assert list(temp.iterdir()) == []  # the private folder is gone
    argv = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    made = [json.loads(line) for line in (tmp_path / "made.jsonl").read_text().splitlines()]
    return argv, made


def _data(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def _never_an_argument(values: list[str], argv: list[list[str]]) -> None:
    for value in values:
        assert not [a for args in argv for a in args if value in a], value


def _only_private_files(modes: dict[str, list[int]]) -> None:
    for file, (mode, folder) in modes.items():
        assert (mode, folder) == (0o600, 0o700), (file, oct(mode), oct(folder))


def test_the_serve_token_is_piped_and_has_no_final_newline(tmp_path: Path) -> None:
    (block,) = [b for b in _blocks() if "prewarm-serve-token --from" in b]
    argv, made = _run(block, tmp_path)
    (secret,) = [m["secret"] for m in made]
    token = _data(secret)["token"]
    # KEDA sends the Secret's bytes: a newline would break its Authorization header
    assert re.fullmatch(r"[0-9a-f]{64}", token), token
    _never_an_argument([token], argv)


@pytest.mark.parametrize("auth", [BEARER, GRPC], ids=lambda a: a.name)
def test_each_trigger_authentication_s_secret_is_copied_without_exposing_it(
    auth: TriggerAuth, tmp_path: Path
) -> None:
    (block,) = [b for b in _blocks() if f"create secret generic {auth.secret} " in b]
    argv, made = _run(block, tmp_path)
    ((secret, modes),) = [(m["secret"], m["modes"]) for m in made]
    meta = secret["metadata"]
    assert (meta["name"], meta["namespace"]) == (auth.secret, "inference")
    data = _data(secret)
    # the keys the rendered TriggerAuthentication reads, each the install's own value
    assert sorted(data) == sorted(auth.keys.values())
    sources = {
        "token": "prewarm-serve-token/token value",
        "ca.crt": "prewarm-serve-tls/ca.crt value",
    }
    for key, value in data.items():
        if auth is GRPC:
            assert value == f"prewarm-grpc-client/{key} value"
        else:
            assert value == sources[key]
    _never_an_argument(list(data.values()), argv)
    assert len(modes) == len(data)
    _only_private_files(modes)
