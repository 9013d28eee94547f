"""``prewarm manifests --kind keda`` never writes the Prometheus URL's credentials into a
ScaledObject."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from prewarm.cli import cli
from prewarm.exit_codes import ExitCode

CONFIG = """
source: {type: prometheus, url: "https://bob:s3cret@prometheus.monitoring.svc:9090"}
workloads:
  - name: chat
    demand: sum(rate(vllm:request_success_total{model_name="chat"}[5m]))
    capacity: {capacity_per_replica: 4}
"""


def test_a_url_with_credentials_is_refused_without_echoing_them(tmp_path: Path) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text(CONFIG)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        ["manifests", "--config", str(path), "--kind", "keda", "--out", str(out),
         "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"],
    )  # fmt: skip
    assert result.exit_code == ExitCode.CONFIG, result.output
    assert "`source.url` carries credentials" in result.output
    assert "https://***@prometheus.monitoring.svc:9090" in result.output
    assert "s3cret" not in result.output and "bob" not in result.output
    assert not out.exists()
