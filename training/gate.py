"""The promotion rule: when a candidate may replace the ``champion``.

Both models are scored on the same recent window (:mod:`training.scoring`). The candidate is
promoted only if all of these hold:

1. **coverage guardrail**: on every workload, the empirical coverage of the quantile the
   workload plans with is at least ``tau - coverage_tolerance``;
2. **cost at SLO not worse**: on the workloads both models serve, every workload the
   champion keeps within its SLO the candidate keeps within it too, and the cost at SLO of
   the gate policy, summed over the workloads where both meet it, is at most the champion's
   times ``1 + cost_tolerance``; where neither meets the SLO, the candidate's unserved
   fraction is not higher;
3. **pinball not worse**: the mean scale-free pinball loss is at most the champion's times
   ``1 + pinball_tolerance``.

Without a champion only the guardrail applies.
"""

from __future__ import annotations

from dataclasses import dataclass

from training.config import GateConfig
from training.scoring import ModelScore


@dataclass(frozen=True)
class GateDecision:
    """The verdict and every number behind it."""

    promote: bool
    reasons: tuple[str, ...]
    candidate_cost: float | None
    champion_cost: float | None
    candidate_pinball: float
    champion_pinball: float | None

    def summary(self) -> str:
        """One line for logs and the model version's description."""
        verdict = "promote" if self.promote else "do not promote"
        return f"{verdict}: " + "; ".join(self.reasons)


def decide(candidate: ModelScore, champion: ModelScore | None, gate: GateConfig) -> GateDecision:
    """Apply the promotion rule (see the module docs)."""
    reasons: list[str] = []
    ok = True
    for name, score in candidate.workloads.items():
        floor = score.tau - gate.coverage_tolerance
        if not score.coverage_at_tau >= floor:
            ok = False
            reasons.append(
                f"coverage guardrail failed on {name}: q{score.tau:g} covers "
                f"{score.coverage_at_tau:.3f} < {floor:.3f}"
            )
    policy = gate.policy
    candidate_pinball = candidate.mean_pinball()
    if champion is None:
        if ok:
            reasons.append("no champion yet; coverage guardrail met")
        return GateDecision(
            ok, tuple(reasons), _cost(candidate, policy), None, candidate_pinball, None
        )

    common = sorted(set(candidate.workloads) & set(champion.workloads))
    both_meet = [
        n
        for n in common
        if candidate.workloads[n].meets_slo[policy] and champion.workloads[n].meets_slo[policy]
    ]
    # Costs are summed where both meet the SLO: elsewhere a cost is not comparable.
    cand_cost = _cost(candidate, policy, both_meet)
    champ_cost = _cost(champion, policy, both_meet)
    for name in common:
        mine, theirs = candidate.workloads[name], champion.workloads[name]
        if theirs.meets_slo[policy] and not mine.meets_slo[policy]:
            ok = False
            reasons.append(f"{name}: the champion meets the SLO with {policy}, the candidate not")
        elif (
            not theirs.meets_slo[policy]
            and not mine.meets_slo[policy]
            and mine.unserved[policy] > theirs.unserved[policy]
        ):
            ok = False
            reasons.append(
                f"{name}: neither meets the SLO and the candidate leaves more unserved "
                f"({mine.unserved[policy]:.4f} > {theirs.unserved[policy]:.4f})"
            )
    if cand_cost is not None and champ_cost is not None:
        limit = champ_cost * (1 + gate.cost_tolerance)
        verdict = "<=" if cand_cost <= limit else ">"
        reasons.append(
            f"cost at SLO ({policy}) {cand_cost:.2f} {verdict} champion {champ_cost:.2f}"
        )
        ok = ok and cand_cost <= limit
    champ_pinball = champion.mean_pinball(common)
    cand_pinball_common = candidate.mean_pinball(common)
    limit = champ_pinball * (1 + gate.pinball_tolerance)
    verdict = "<=" if cand_pinball_common <= limit else ">"
    reasons.append(f"pinball {cand_pinball_common:.4f} {verdict} champion {champ_pinball:.4f}")
    ok = ok and cand_pinball_common <= limit
    return GateDecision(ok, tuple(reasons), cand_cost, champ_cost, candidate_pinball, champ_pinball)


def _cost(score: ModelScore, policy: str, names: list[str] | None = None) -> float | None:
    """Summed cost at SLO over the workloads that meet it (None when none does)."""
    names = list(score.workloads) if names is None else names
    costs = [score.workloads[n].costs[policy] for n in names]
    met = [c for c in costs if c is not None]
    return float(sum(met)) if met else None
