"""A real Prometheus server for tests: OpenMetrics history, promtool backfill, start, stop.

Reuse from any test package::

    from tests.integration.prometheus import Gauge, Counter, prometheus_factory  # noqa: F401

    def test_something(prometheus_factory):
        server = prometheus_factory([Gauge("queue_depth", [({"model": "m"}, points)])])
        ...  # server.url is "http://127.0.0.1:<port>"

Importing the ``prometheus_factory`` fixture into a test module or ``conftest.py`` makes it
available there. Without the Debian package ``prometheus`` the fixture skips the test with
the install command, unless ``PREWARM_REQUIRE_TOOLS=1`` (set by CI) turns the skip into a
failure (tests/tools.py).

History is backfilled offline into a fresh data directory before the server starts (the
safe path: backfilling into a running server's head block is not). ``promtool`` converts
about 10,000 samples a second here, so keep histories to a few series x a few days at
1-minute steps. Servers started with ``scrape_configs`` also scrape live targets.
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.tools import missing

INSTALL_HINT = (
    "needs the Debian package `prometheus` (binaries `prometheus` and `promtool`); "
    "install it with `sudo apt-get install -y prometheus`"
)

Labels = Mapping[str, str]
Points = Sequence[tuple[float, float]]
"""``(unix_seconds, value)`` pairs in increasing time order."""


@dataclass(frozen=True)
class Family:
    """One OpenMetrics metric family and its series.

    ``series`` pairs a label set with its points. For counters, ``name`` is the family name
    and samples are written as ``<name>_total`` (OpenMetrics requires the suffix), so query
    ``<name>_total``.
    """

    name: str
    type: str
    series: Sequence[tuple[Labels, Points]]
    help: str = ""

    def __post_init__(self) -> None:
        if self.type not in ("gauge", "counter", "unknown"):
            raise ValueError(f"`type` must be gauge, counter or unknown, got {self.type!r}")


def Gauge(name: str, series: Sequence[tuple[Labels, Points]], help: str = "") -> Family:  # noqa: N802
    """A gauge family (constructor-like helper, hence the capital)."""
    return Family(name, "gauge", series, help)


def Counter(name: str, series: Sequence[tuple[Labels, Points]], help: str = "") -> Family:  # noqa: N802
    """A counter family; samples are named ``<name>_total``."""
    return Family(name.removesuffix("_total"), "counter", series, help)


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _format_time(timestamp: float) -> str:
    # OpenMetrics wants Unix seconds; %g would round large values to 6 significant digits.
    return str(int(timestamp)) if float(timestamp).is_integer() else repr(float(timestamp))


def _format_labels(labels: Labels) -> str:
    if not labels:
        return ""
    escaped = (
        f'{key}="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for key, value in sorted(labels.items())
    )
    return "{" + ",".join(escaped) + "}"


def render_openmetrics(families: Iterable[Family]) -> str:
    """OpenMetrics text for ``families``, every sample timestamped, ending with ``# EOF``."""
    lines: list[str] = []
    for family in families:
        if family.help:
            lines.append(f"# HELP {family.name} {family.help}")
        lines.append(f"# TYPE {family.name} {family.type}")
        sample_name = f"{family.name}_total" if family.type == "counter" else family.name
        for labels, points in family.series:
            label_text = _format_labels(labels)
            previous = -math.inf
            for timestamp, value in points:
                if timestamp <= previous:
                    raise ValueError(
                        f"points of {sample_name}{label_text} must be in strictly increasing "
                        f"time order, got {timestamp!r} after {previous!r}"
                    )
                previous = timestamp
                lines.append(
                    f"{sample_name}{label_text} {_format_value(value)} {_format_time(timestamp)}"
                )
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Binaries:
    prometheus: str
    promtool: str


def find_binaries() -> Binaries | None:
    """The ``prometheus`` and ``promtool`` executables on PATH, or None."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        return None
    return Binaries(prometheus, promtool)


def require_binaries() -> Binaries:
    """The binaries, or skip the test (fail it when ``PREWARM_REQUIRE_TOOLS=1``)."""
    binaries = find_binaries()
    if binaries is None:
        missing(f"this test {INSTALL_HINT}")
    return binaries


def backfill(binaries: Binaries, families: Iterable[Family], data_dir: Path) -> Path:
    """Write ``families`` as OpenMetrics and turn them into TSDB blocks in ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir.parent / f"{data_dir.name}.om.txt"
    source.write_text(render_openmetrics(families))
    # Blocks up to 54h keep the block count (and startup time) low for multi-day histories.
    completed = subprocess.run(
        [
            binaries.promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--max-block-duration=54h",
            str(source),
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"promtool backfill of {source} failed ({completed.returncode}):\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
    return source


def free_port() -> int:
    """A TCP port nothing listens on right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PrometheusServer:
    """A ``prometheus`` process on 127.0.0.1 serving ``data_dir``.

    Parameters
    ----------
    binaries
        From :func:`require_binaries`.
    data_dir
        TSDB directory, possibly filled by :func:`backfill`.
    scrape_configs
        Prometheus ``scrape_configs`` entries, e.g. ``[{"job_name": "app",
        "scrape_interval": "1s", "static_configs": [{"targets": ["127.0.0.1:8000"]}]}]``.
    extra_flags
        More command-line flags, e.g. ``["--query.lookback-delta=1m"]``.
    """

    binaries: Binaries
    data_dir: Path
    scrape_configs: Sequence[Mapping[str, Any]] = ()
    extra_flags: Sequence[str] = ()
    port: int = 0
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log_path: Path | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready_timeout: float = 30.0) -> PrometheusServer:
        """Start the process and wait until ``/-/ready`` answers 200."""
        config_path = self.data_dir.parent / f"{self.data_dir.name}.prometheus.yml"
        config_path.write_text(
            yaml.safe_dump(
                {"global": {"scrape_interval": "15s"}, "scrape_configs": list(self.scrape_configs)}
            )
        )
        self._log_path = self.data_dir.parent / f"{self.data_dir.name}.prometheus.log"
        # A port picked by free_port() can be taken by another process before we bind it;
        # try a few times rather than fail a test on that race.
        for _ in range(3):
            self.port = free_port()
            with self._log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    [
                        self.binaries.prometheus,
                        f"--config.file={config_path}",
                        f"--storage.tsdb.path={self.data_dir}",
                        "--storage.tsdb.retention.time=100y",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        *self.extra_flags,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            if self._wait_ready(ready_timeout):
                return self
            self.stop()
        raise RuntimeError(f"prometheus did not become ready; log:\n{self.log()[-3000:]}")

    def _wait_ready(self, timeout: float) -> bool:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.1)
        return False

    def log(self) -> str:
        """The server's output so far (for failure messages)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 10 s)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


ServerFactory = Callable[..., PrometheusServer]


@pytest.fixture(scope="module")
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerFactory]:
    """Start Prometheus servers for the current test module; all stop at its end.

    Call it as ``prometheus_factory(families=(), *, scrape_configs=(), extra_flags=())``:
    it backfills ``families`` into a fresh directory, starts a server on a free 127.0.0.1
    port, waits for readiness, and returns the :class:`PrometheusServer`.
    """
    binaries = require_binaries()
    servers: list[PrometheusServer] = []

    def start(
        families: Iterable[Family] = (),
        *,
        scrape_configs: Sequence[Mapping[str, Any]] = (),
        extra_flags: Sequence[str] = (),
    ) -> PrometheusServer:
        data_dir = tmp_path_factory.mktemp("prometheus") / "data"
        families = list(families)
        if families:
            backfill(binaries, families, data_dir)
        else:
            data_dir.mkdir()
        server = PrometheusServer(binaries, data_dir, scrape_configs, extra_flags)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()
