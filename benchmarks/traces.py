"""The five public traces the benchmarks run on, in one table.

Each is a file of the shared data directory (``../shared/data``); ``name`` labels it in the
results, ``workload`` is the DNS-label name it gets where a benchmark makes it a workload of
a training config.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Trace:
    """One demand-like file of the data directory."""

    name: str
    file: str
    workload: str
    value_col: str | None = None


TRACES = (
    Trace("nyc_taxi_passengers_30min", "nyc_taxi_passengers_30min.csv", "nyc-taxi"),
    Trace("twitter_volume_amzn_5min", "twitter_volume_amzn_5min.csv", "twitter"),
    Trace("asg_cpu_utilization_5min", "asg_cpu_utilization_5min.csv", "asg-cpu"),
    Trace("azure_vm_cpu_5min_relative", "azure_vm_cpu_5min_relative.csv", "azure-vm", "cpu_usage"),
    Trace("google_cluster_cpu_5min", "google_cluster_cpu_5min.csv", "google-cpu"),
)


def chosen_traces(
    parser: argparse.ArgumentParser,
    names: Sequence[str],
    subset: str | None,
    what: str = "traces",
) -> list[str]:
    """``names``, or the comma-separated ``subset`` of them (``--traces``); an unknown name
    is a usage error listing the valid ones (``what`` names them)."""
    if not subset:
        return list(names)
    wanted = [n.strip() for n in subset.split(",") if n.strip()]
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        parser.error(f"unknown {what} {unknown}; valid: {', '.join(names)}")
    return wanted
