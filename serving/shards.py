"""Shards: which replica of a sharded ``prewarm serve`` holds which workload.

Past the workloads one server holds, the fleet is split over ``N`` Deployments of the same
image and config, each started with ``--shard K/N``. A workload's shard is a stable hash of
its name, so adding or removing a workload never moves the others, and ``prewarm manifests
--shards N`` points each KEDA trigger at the Service of the shard that holds it. The HPA
cannot be sharded this way: the External Metrics API has one Service per cluster.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from forecaster.exceptions import ConfigError, shown

_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
MAX_SHARDS = 256
"""The most shards a fleet is split over (``serve --shard K/N``, ``manifests --shards N``,
``certs --shards N``). Each is a Deployment, a Service and four names in the serving
certificate; 256 servers of 10,000 workloads each (docs/scale.md) is past any fleet, so a
larger N is a typo, not a plan."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise ConfigError(f"a shard is K/N with 1 <= K <= N, got {self.index}/{self.count}")
        if self.count > MAX_SHARDS:
            raise ConfigError(
                f"a shard is K/N with N at most {MAX_SHARDS}, got {self.index}/{self.count}"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` -> ``Shard(2, 4)``; anything else is a :class:`ConfigError`."""
        match = _FORM.match(text)
        if match is None:
            raise ConfigError(f"a shard is K/N, e.g. 2/4, got {shown(text)}")
        return cls(int(match[1]), int(match[2]))

    def holds(self, workload: str) -> bool:
        """Whether this shard serves ``workload``."""
        return shard_of(workload, self.count) == self.index


def shard_of(workload: str, count: int) -> int:
    """The 1-based shard of ``workload`` among ``count`` (CRC-32 of its name: stable
    across processes and versions, unlike Python's salted ``hash``)."""
    return zlib.crc32(workload.encode()) % count + 1
