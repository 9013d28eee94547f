"""Policy drift: a served workload whose config section disagrees with the registered policy.

The model version carries the policy each workload was trained, validated and registered
with, and serving plans with exactly that one. When the config file serving reads says
something else (a doubled capacity per replica, a longer cold start), nothing is served for
the workload: neither the registered policy (the operator asked for another) nor the
config's (no model was validated with it). Its metric answers the same error as stale data,
so the HPA holds and the reactive path keeps working, and the service says which fields
differ and since which version, until the workload is retrained or the config reverted.
"""

from __future__ import annotations

from forecaster.workload import WorkloadPolicy
from serving.settings import WorkloadConfig

__all__ = ["policy_drift"]


def policy_drift(workload: WorkloadConfig, registered: WorkloadPolicy, version: str) -> str | None:
    """Why ``workload``'s config disagrees with the policy registered with ``version``.

    Returns
    -------
    str or None
        ``"workload chat: capacity_per_replica 0.05 -> 0.1 since version 3: retrain or
        revert"`` (registered value first, every differing field), or None when they agree.
    """
    found = registered.differences(workload.policy, ignore=workload.deferred)
    # The spec's fields without their prefix, as the config file names them.
    changes = [change.removeprefix("spec.") for change in found]
    if not changes:
        return None
    return (
        f"workload {workload.name}: {', '.join(changes)} since version {version}: retrain or revert"
    )
