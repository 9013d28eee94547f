"""The commands of docs/install.md that make Secrets and the front-proxy ConfigMap, run as
written against a stand-in ``kubectl``: each Secret gets the keys its TriggerAuthentication
reads and the values of the install's own Secrets, and no secret value is ever an argument
of a process (visible to every user in ``ps``), only piped or in files of mode 0600 in a
private folder that is removed afterwards. Each copy waits for the Certificates it reads,
stops without making anything when a source is missing, and can be run again (after a
renewal) to replace its object in place; it runs in bash and in zsh."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prewarm.manifests import BEARER, GRPC, TriggerAuth
from tests.deploy.rendered import ROOT, named, render

INSTALL_MD = ROOT / "docs" / "install.md"
SERVING_MD = ROOT / "docs" / "serving.md"
# A stand-in for kubectl, keeping its cluster in a JSON file (KUBECTL_STATE). It logs its
# arguments. `get secret|configmap S -o jsonpath={.data.K}` answers "S/K value" (a Secret's
# base64-encoded; KUBECTL_GENERATION, when set, is appended, as after a renewal), fails as
# NotFound when S is in KUBECTL_MISSING, and answers nothing (as kubectl does for a missing
# key) when "S/K" is; `get ... -o name` names an object that is not missing. `wait` fails as
# a timeout when its object is in KUBECTL_UNISSUED, and on every Certificate when
# KUBECTL_NO_CERT_MANAGER is set (a cluster without cert-manager's kinds).
# `create` runs the real kubectl client-side (it builds the object without a cluster) and
# records the mode of each file it read: with --dry-run=client it prints the object, without
# it stores the object, refusing one that exists, as kubectl does. `apply -f -` stores the
# objects read from stdin, replacing any of the same kind, namespace and name, and refuses a
# Secret applied client-side (its data would stay in the last-applied annotation);
# `apply -k` (the install itself) is only logged.
FAKE_KUBECTL = """
import base64, fcntl, json, os, stat, subprocess, sys
import yaml

args = sys.argv[1:]
with open(os.environ["KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
missing = set(os.environ.get("KUBECTL_MISSING", "").split())
unissued = set(os.environ.get("KUBECTL_UNISSUED", "").split())
generation = os.environ.get("KUBECTL_GENERATION", "")


def namespace(obj):
    return obj["metadata"].get("namespace") or ""


def store(objects, replace):
    with open(os.environ["KUBECTL_STATE"], "a+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        state = json.loads(file.read() or "{}")
        for obj in objects:
            name = obj["metadata"]["name"]
            key = "/".join([obj["kind"], namespace(obj), name])
            if key in state and not replace:
                sys.exit(f'Error from server (AlreadyExists): "{name}" already exists')
            state[key] = obj
        file.seek(0)
        file.truncate()
        file.write(json.dumps(state))


if args[0] == "-n":
    args = args[2:]
verb = args[0]
if verb == "get" and args[1] in ("secret", "configmap"):
    name = args[2]
    if name in missing:
        sys.exit(f'Error from server (NotFound): {args[1]}s "{name}" not found')
    if args[3:] == ["-o", "name"]:
        print(f"{args[1]}/{name}")
        sys.exit(0)
    path = next(a for a in args if a.startswith("jsonpath="))
    key = path.removeprefix("jsonpath={.data.").removesuffix("}").replace("\\\\.", ".")
    if f"{name}/{key}" not in missing:
        value = f"{name}/{key} value{generation}"
        if args[1] == "secret":
            value = base64.b64encode(value.encode()).decode()
        sys.stdout.write(value)
elif verb == "wait":
    if os.environ.get("KUBECTL_NO_CERT_MANAGER"):
        sys.exit('error: the server doesn\\'t have a resource type "certificate"')
    for what in args:
        if what.partition("/")[2] in unissued:
            sys.exit(f"error: timed out waiting for the condition on {what}")
elif verb == "create":
    files = [a.split("=", 2)[2] for a in args if a.startswith("--from-file=")]
    mode = lambda path: stat.S_IMODE(os.stat(path).st_mode)
    modes = {f: [mode(f), mode(os.path.dirname(f))] for f in files if not f.startswith("/dev/")}
    with open(os.environ["KUBECTL_MADE"], "a") as made:
        made.write(json.dumps(modes) + "\\n")
    real = [os.environ["REAL_KUBECTL"], *sys.argv[1:]]
    if "--dry-run=client" in args:
        sys.exit(subprocess.run(real).returncode)
    done = subprocess.run([*real, "--dry-run=client", "-o", "json"], capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr)
    store([json.loads(done.stdout)], replace=False)
elif verb == "apply" and args[-2:] == ["-f", "-"]:
    server_side = args[1:-2] == ["--server-side", "--force-conflicts"]
    if not server_side and args[1:-2]:
        sys.exit(f"the stand-in kubectl does not know {args}")
    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    if not objects:
        sys.exit("error: no objects passed to apply")
    if not server_side and any(o["kind"] == "Secret" for o in objects):
        sys.exit("a Secret applied client-side keeps its data in an annotation")
    store(objects, replace=True)
elif verb == "apply" and args[1] == "-k":
    pass  # the install itself: not modelled
else:
    sys.exit(f"the stand-in kubectl does not know {args}")
"""
SHELLS = ["bash", "zsh"]


@dataclass
class Run:
    """One run of a block: its exit status, what it printed to stderr, every kubectl argv
    so far (in order), the objects the stand-in cluster holds, and the modes of each file
    (and its folder) that a `create` read."""

    returncode: int
    stderr: str
    argv: list[list[str]]
    objects: dict[str, dict[str, Any]]
    modes: list[dict[str, list[int]]]

    def object(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get(f"{kind}/{namespace}/{name}")


def _sh_blocks(path: Path) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", path.read_text(), re.DOTALL)


def _block(marker: str) -> str:
    """The one sh block of install.md holding ``marker``."""
    (block,) = [b for b in _sh_blocks(INSTALL_MD) if marker in b]
    return block


def _run(
    block: str,
    tmp_path: Path,
    *,
    shell: str = "bash",
    missing: tuple[str, ...] = (),
    unissued: tuple[str, ...] = (),
    generation: str = "",
    cert_manager: bool = True,
) -> Run:
    """``block`` under ``shell`` with the stand-in kubectl. The stand-in's cluster is kept
    in ``tmp_path``: a second run there sees what the first made."""
    real = shutil.which("kubectl")
    if real is None:
        pytest.fail("kubectl is needed to build the objects (kubectl create --dry-run=client)")
    if shutil.which(shell) is None:
        missing(f"{shell} is not installed: `sudo apt-get install -y {shell}`")
    bin_dir, temp = tmp_path / "bin", tmp_path / "tmp"
    if not bin_dir.exists():
        bin_dir.mkdir(parents=True)
        temp.mkdir()
        kubectl = bin_dir / "kubectl"
        kubectl.write_text(f"#!{sys.executable}\n{FAKE_KUBECTL}")
        kubectl.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(temp),
        "KUBECTL_LOG": str(tmp_path / "argv.jsonl"),
        "KUBECTL_MADE": str(tmp_path / "made.jsonl"),
        "KUBECTL_STATE": str(tmp_path / "state.json"),
        "KUBECTL_MISSING": " ".join(missing),
        "KUBECTL_UNISSUED": " ".join(unissued),
        "KUBECTL_GENERATION": generation,
        "KUBECTL_NO_CERT_MANAGER": "" if cert_manager else "1",
        "REAL_KUBECTL": real,
    }
    done = subprocess.run(
        [shell, "-c", block],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert list(temp.iterdir()) == []  # the private folder is gone, whatever happened

    def lines(name: str) -> list[Any]:
        path = tmp_path / name
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    state = tmp_path / "state.json"
    objects = json.loads(state.read_text()) if state.exists() else {}
    return Run(done.returncode, done.stderr, lines("argv.jsonl"), objects, lines("made.jsonl"))


def _namespace(args: list[str]) -> str | None:
    return args[args.index("-n") + 1] if "-n" in args else None


def _data(obj: dict[str, Any]) -> dict[str, str]:
    if obj["kind"] == "Secret":
        return {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}
    return dict(obj["data"])


def _never_an_argument(values: list[str], argv: list[list[str]]) -> None:
    for value in values:
        assert not [a for args in argv for a in args if value in a], value


def _only_private_files(modes: list[dict[str, list[int]]]) -> None:
    for file, (mode, folder) in [item for made in modes for item in made.items()]:
        assert (mode, folder) == (0o600, 0o700), (file, oct(mode), oct(folder))


@dataclass(frozen=True)
class Copy:
    """A block of install.md copying objects of the install (or of the cluster) into one
    object: its marker in install.md, what it makes, and where each of its keys comes
    from ("SOURCE/KEY")."""

    marker: str
    kind: str
    namespace: str
    name: str
    sources: dict[str, str]

    @property
    def block(self) -> str:
        return _block(self.marker)

    def expected(self, generation: str = "") -> dict[str, str]:
        return {key: f"{source} value{generation}" for key, source in self.sources.items()}


def _secret_copy(auth: TriggerAuth, sources: dict[str, str]) -> Copy:
    marker = f"create secret generic {auth.secret} "
    return Copy(marker, "Secret", "inference", auth.secret, sources)


KEDA = _secret_copy(
    BEARER, {"token": "prewarm-serve-token/token", "ca.crt": "prewarm-serve-tls/ca.crt"}
)
GRPC_CLIENT = _secret_copy(GRPC, {k: f"prewarm-grpc-client/{k}" for k in GRPC.keys.values()})
FRONT_PROXY = Copy(
    "create configmap prewarm-front-proxy ",
    "ConfigMap",
    "prewarm",
    "prewarm-front-proxy",
    {
        key: f"extension-apiserver-authentication/{key}"
        for key in ("requestheader-client-ca-file", "requestheader-allowed-names")
    },
)
COPIES = [KEDA, GRPC_CLIENT, FRONT_PROXY]
SECRET_COPIES = [KEDA, GRPC_CLIENT]


def _name(copy: Copy) -> str:
    return f"{copy.kind}-{copy.name}"


def test_the_serve_token_is_piped_and_has_no_final_newline(tmp_path: Path) -> None:
    run = _run(_block("create secret generic prewarm-serve-token --from"), tmp_path)
    assert run.returncode == 0, run.stderr
    secret = run.object("Secret", "prewarm", "prewarm-serve-token")
    assert secret is not None
    token = _data(secret)["token"]
    # KEDA sends the Secret's bytes: a newline would break its Authorization header
    assert re.fullmatch(r"[0-9a-f]{64}", token), token
    _never_an_argument([token], run.argv)


@pytest.mark.parametrize("auth", [BEARER, GRPC], ids=lambda a: a.name)
def test_each_trigger_authentication_s_secret_has_the_keys_it_reads(
    auth: TriggerAuth, tmp_path: Path
) -> None:
    (copy,) = [c for c in SECRET_COPIES if c.name == auth.secret]
    run = _run(copy.block, tmp_path)
    assert run.returncode == 0, run.stderr
    secret = run.object("Secret", "inference", auth.secret)
    assert secret is not None
    # the keys the rendered TriggerAuthentication reads, each the install's own value
    assert sorted(_data(secret)) == sorted(auth.keys.values())


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("copy", COPIES, ids=_name)
def test_each_copy_makes_its_object_from_its_sources(
    copy: Copy, shell: str, tmp_path: Path
) -> None:
    run = _run(copy.block, tmp_path, shell=shell)
    assert run.returncode == 0, run.stderr
    made = run.object(copy.kind, copy.namespace, copy.name)
    assert made is not None, run.objects
    assert _data(made) == copy.expected()


@pytest.mark.parametrize("copy", SECRET_COPIES, ids=_name)
def test_a_secret_copy_never_exposes_a_value(copy: Copy, tmp_path: Path) -> None:
    run = _run(copy.block, tmp_path)
    assert run.returncode == 0, run.stderr
    values = list(copy.expected().values())
    _never_an_argument(values, run.argv)
    (modes,) = run.modes
    assert len(modes) == len(values)
    _only_private_files(run.modes)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("copy", COPIES, ids=_name)
def test_a_copy_with_a_source_missing_fails_and_makes_nothing(
    copy: Copy, shell: str, tmp_path: Path
) -> None:
    # a Secret not there (NotFound) or there without the key (kubectl prints nothing). In
    # zsh the folder is removed only because the blocks exit explicitly: zsh skips the
    # EXIT trap when set -e ends the shell in, or just after, a function.
    names = sorted({source.split("/")[0] for source in copy.sources.values()})
    for n, absent in enumerate([*names, *copy.sources.values()]):
        run = _run(copy.block, tmp_path / str(n), shell=shell, missing=(absent,))
        assert run.returncode != 0, absent
        assert absent.split("/")[-1] in run.stderr, (absent, run.stderr)
        assert run.object(copy.kind, copy.namespace, copy.name) is None, absent


@pytest.mark.parametrize("copy", COPIES, ids=_name)
def test_a_copy_run_again_replaces_its_object_in_place(copy: Copy, tmp_path: Path) -> None:
    first = _run(copy.block, tmp_path)
    assert first.returncode == 0, first.stderr
    # again after a renewal: the same object, with the new values, never deleted meanwhile
    again = _run(copy.block, tmp_path, generation=" renewed")
    assert again.returncode == 0, again.stderr
    kept = [k for k in again.objects if k.startswith(f"{copy.kind}/{copy.namespace}/")]
    assert kept == [f"{copy.kind}/{copy.namespace}/{copy.name}"]
    made = again.object(copy.kind, copy.namespace, copy.name)
    assert made is not None
    assert _data(made) == copy.expected(" renewed")
    assert not [args for args in again.argv if "delete" in args]


@pytest.mark.parametrize("copy", SECRET_COPIES, ids=_name)
def test_a_secret_copy_waits_for_the_certificates_it_reads(copy: Copy, tmp_path: Path) -> None:
    # the Certificates of the KEDA install, by the Secret cert-manager writes them to
    certificates = {
        c["spec"]["secretName"]: c["metadata"]["name"]
        for c in named(render("overlays/keda"), "Certificate")
    }
    run = _run(copy.block, tmp_path)
    assert run.returncode == 0, run.stderr
    read = [
        (i, args[args.index("secret") + 1])
        for i, args in enumerate(run.argv)
        if "get" in args and "secret" in args
    ]
    issued = [(i, s) for i, s in read if s in certificates]
    assert issued, read  # each copy reads at least one certificate's Secret
    for i, secret in issued:
        waited = [
            args
            for args in run.argv[:i]
            if "wait" in args
            and _namespace(args) == "prewarm"
            and "--for=condition=Ready" in args
            and f"certificate/{certificates[secret]}" in args
        ]
        assert waited, (secret, run.argv[:i])
    # and a Certificate never issued, its Secret not written yet, stops it before it reads
    # anything of it or makes anything
    for secret, name in {(s, certificates[s]) for _, s in issued}:
        stopped = _run(copy.block, tmp_path / name, unissued=(name,), missing=(secret,))
        assert stopped.returncode != 0
        assert not [args for args in stopped.argv if "jsonpath" in " ".join(args)]
        assert stopped.objects == {}


@pytest.mark.parametrize("copy", SECRET_COPIES, ids=_name)
def test_a_secret_copy_runs_where_prewarm_certs_wrote_the_secrets(
    copy: Copy, tmp_path: Path
) -> None:
    """`prewarm certs --kind keda` installs no cert-manager: there is no Certificate kind to
    wait on, and the Secrets are there once applied."""
    run = _run(copy.block, tmp_path, cert_manager=False)
    assert run.returncode == 0, run.stderr
    made = run.object(copy.kind, copy.namespace, copy.name)
    assert made is not None and _data(made) == copy.expected("")
    # and without the Secret it stops, making nothing
    checked = {args[args.index("secret") + 1] for args in run.argv if args[-2:] == ["-o", "name"]}
    assert checked, run.argv
    for source in checked:
        stopped = _run(copy.block, tmp_path / source, cert_manager=False, missing=(source,))
        assert stopped.returncode != 0 and stopped.objects == {}


def test_no_command_is_a_variable_holding_a_command() -> None:
    # `$get jsonpath=...` runs a command named by the whole value in zsh (macOS's default
    # shell), which does not split unquoted variables into words: a function does it in both
    as_command = re.compile(r"(?:^|[|;&({]|\$\(|&&|\|\|)\s*\$\{?\w+")
    for path in (INSTALL_MD, SERVING_MD):
        for block in _sh_blocks(path):
            for line in block.splitlines():
                assert not as_command.search(line), (path.name, line)
