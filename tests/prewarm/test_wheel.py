"""``prewarm demo`` from an installed wheel, not from the checkout.

The wheel is built from a copy of the checkout (the build writes ``build/`` and
``*.egg-info`` beside the sources), installed with ``--no-deps`` into a fresh venv whose only
view of the dependencies is a ``.pth`` line naming the dev venv's site-packages (that line
adds the directory without running its ``.pth`` files, so the checkout's editable install is
not active there), and run from an empty working directory: every file the demo reads must
come from the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("forecaster", "training", "serving", "prewarm", "examples", "data")
BUILD_FILES = ("pyproject.toml", "README.md")

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{args[:3]} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def _wheel(tmp: Path, env: dict[str, str]) -> Path:
    source = tmp / "source"
    ignore = shutil.ignore_patterns("__pycache__", "_proto", "*.egg-info", "build")
    for name in SOURCES:
        # symlinks=True: the package's demo files stay links into examples/ and data/, as in
        # the checkout, so the build is the one a user's `pip wheel .` makes.
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=ignore)
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, source / name)
    out = tmp / "wheels"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    _run([*pip, "-w", str(out), str(source)], tmp, env, timeout=300)
    (wheel,) = out.glob("prewarm-*.whl")
    return wheel


def _fresh_venv(tmp: Path) -> Path:
    folder = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return folder


def test_demo_runs_from_the_installed_wheel(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    env.update(MPLCONFIGDIR=str(tmp_path / "mpl"), MPLBACKEND="Agg")
    wheel = _wheel(tmp_path, env)
    folder = _fresh_venv(tmp_path)
    python = str(folder / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q"]
    _run([*pip, str(wheel)], tmp_path, env, timeout=300)

    work = tmp_path / "work"
    work.mkdir()
    where = _run(
        [python, "-c", "import prewarm, prewarm.demo as d; print(prewarm.__file__, d.DEMO_CONFIG)"],
        work,
        env,
        timeout=60,
    )
    module, config = (Path(p) for p in where.split())
    assert module.is_relative_to(folder), module  # the wheel's copy, not the checkout
    assert config.is_relative_to(folder) and config.is_file()
    assert not config.is_symlink()

    output = _run(
        [str(folder / "bin" / "prewarm"), "demo", "--out", "report"], work, env, timeout=600
    )
    assert "Report: report/README.md" in output
    report = (work / "report" / "README.md").read_text()
    assert "| [google-cluster]" in report and "| [viral-launch]" in report
    assert (work / "mlflow.db").is_file()  # the demo's store, in the working directory
