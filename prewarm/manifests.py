"""``prewarm manifests``: per workload, the HPA or KEDA ScaledObject the backtest simulated.

The numbers (targets, behavior, tolerance) come from
:func:`forecaster.policies.autoscaler.hpa_spec`, which reads them off the backtest's own
``hybrid`` policy object for the workload's policy: the registered champion's
``policies.json`` when the MLflow store has one, else the config.

Exit codes (see :mod:`prewarm.exit_codes`)
------------------------------------------
0  manifests written
1  the MLflow store could not be read, or a file could not be written
2  bad configuration (the message names the field and the value)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from prewarm.exit_codes import ExitCode, epilog, exit_code, fail
from prewarm.options import OutputFolder, config_option, tracking_uri_option
from prewarm.services import (
    CLIENT_SECRET,
    GRPC_PORT,
    HTTPS_PORT,
    NAMESPACE,
    SERVICE,
    SERVING_SECRET,
    TOKEN_SECRET,
    host,
    service_of,
)
from serving.shards import MAX_SHARDS

if TYPE_CHECKING:
    from forecaster.workload import WorkloadPolicy
    from training.config import TrainConfig

Kind = Literal["hpa", "keda"]
# The forecast metric whose target the backtest simulates (demand per replica at the forecast
# path's utilization); serving/wire/k8s.py serves it, selected by the workload label.
FORECAST_METRIC = "prewarm_forecast_demand"
TOLERANCE_NOTE = (
    "per-HPA tolerance (KEP-4951): Kubernetes >= 1.35 (beta, on by default); "
    "1.33-1.34 only with the HPAConfigurableTolerance feature gate"
)


@dataclass(frozen=True)
class Wiring:
    """Where the rendered autoscaler reads its metrics (deployment facts, not policy)."""

    namespace: str
    demand_metric: str
    service: str = SERVICE  # the Service of the `prewarm serve` that holds the workload


@dataclass(frozen=True)
class TriggerAuth:
    """A KEDA TriggerAuthentication that prewarm's triggers name, and the Secret of the
    workload's namespace it reads (made from the install's own Secrets: docs/install.md,
    "With KEDA")."""

    name: str
    secret: str
    keys: Mapping[str, str]  # KEDA's parameter -> the Secret's key
    source: str  # the install's Secrets it is copied from, for the rendered file's header

    def manifest(self, namespace: str) -> dict[str, Any]:
        """The TriggerAuthentication in ``namespace``."""
        return {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "TriggerAuthentication",
            "metadata": {"name": self.name, "namespace": namespace},
            "spec": {
                "secretTargetRef": [
                    {"parameter": parameter, "name": self.secret, "key": key}
                    for parameter, key in self.keys.items()
                ]
            },
        }


# metrics-api: the bearer token `prewarm serve` checks, and the CA that signed its certificate.
BEARER = TriggerAuth(
    "prewarm-bearer",
    "prewarm-keda",
    {"token": "token", "ca": "ca.crt"},
    f"{NAMESPACE}/{TOKEN_SECRET} and {NAMESPACE}/{SERVING_SECRET}",
)
# external-push: KEDA authenticates to an external scaler with a client certificate only.
GRPC = TriggerAuth(
    "prewarm-grpc",
    CLIENT_SECRET,
    {"tlsClientCert": "tls.crt", "tlsClientKey": "tls.key", "caCert": "ca.crt"},
    f"{NAMESPACE}/{CLIENT_SECRET}",
)
TRIGGER_AUTHS = {auth.name: auth for auth in (BEARER, GRPC)}


@dataclass(frozen=True)
class Policies:
    """Each workload's policy and where it came from (said in the output)."""

    by_workload: dict[str, WorkloadPolicy]
    origin: str
    version: str | None = None  # the registered version they are read from


# -- policies --------------------------------------------------------------------------------
def registered_policies(config: TrainConfig, tracking_uri: str) -> Policies | None:
    """The champion version's registered policies, or ``None`` when there is no champion.

    Raises
    ------
    TrackingError
        The store cannot be read, or the champion's ``policies.json`` is missing or invalid
        (rendering the config's numbers then would not be what is served).
    """
    from training.registry import champion_version
    from training.settings import missing_sqlite_store
    from training.store import store_client
    from training.tracking import POLICIES_ARTIFACT
    from training.tracking import registered_policies as read_policies

    name = config.mlflow.registered_model
    if missing_sqlite_store(tracking_uri) is not None:  # nothing registered; opening creates it
        return None
    version = champion_version(name, tracking_uri=tracking_uri)
    if version is None:
        return None
    client = store_client(tracking_uri)
    policies = read_policies(client, name, version)
    return Policies(policies, f"{POLICIES_ARTIFACT} of {name} v{version} (champion)", version)


def resolve_policies(config: TrainConfig, config_path: Path, tracking_uri: str) -> Policies:
    """The registered policies of the workloads in ``config``, else the config's own."""
    registered = registered_policies(config, tracking_uri)
    if registered is None:
        # A measured (`auto`) field has no value to render before training: refused here.
        return Policies(config.policies, f"the config {config_path} (no registered policies)")
    declared = [w.name for w in config.workloads]
    missing = sorted(set(declared) - set(registered.by_workload))
    if missing:
        from forecaster.exceptions import ConfigError

        raise ConfigError(
            f"workloads {missing} of {config_path} have no policy in {registered.origin}: "
            "train them first"
        )
    return Policies({w: registered.by_workload[w] for w in declared}, registered.origin)


# -- manifests -------------------------------------------------------------------------------
def hpa_manifest(name: str, policy: WorkloadPolicy, wiring: Wiring) -> dict[str, Any]:
    """The ``autoscaling/v2`` HorizontalPodAutoscaler of workload ``name``.

    The demand is an ``Object`` metric on the Deployment, from ``custom.metrics.k8s.io``
    (e.g. prometheus-adapter's rules): prewarm owns ``external.metrics.k8s.io``, and an
    ``Object`` metric with an ``AverageValue`` target scales exactly as the simulated
    External one (``ceil(demand / target)``).
    """
    from forecaster.policies.autoscaler import hpa_spec

    spec = hpa_spec(
        policy,
        forecast_metric={
            "type": "External",
            "external": {
                "metric": {"name": FORECAST_METRIC, "selector": {"matchLabels": {"workload": name}}}
            },
        },
        demand_metric={
            "type": "Object",
            "object": {
                "describedObject": _deployment(name),
                "metric": {"name": wiring.demand_metric},
            },
        },
    )
    for metric in spec["metrics"]:
        target = metric[metric["type"].lower()]["target"]
        target["averageValue"] = _quantity(target["averageValue"])
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": wiring.namespace},
        "spec": {
            "scaleTargetRef": _deployment(name),
            **spec,
            "behavior": _behavior_quantities(spec["behavior"]),
        },
    }


def scaled_object(
    name: str, policy: WorkloadPolicy, wiring: Wiring, prometheus_url: str, demand_query: str
) -> dict[str, Any]:
    """The KEDA ScaledObject of workload ``name``: the same HPA, with KEDA's triggers.

    The demand comes from KEDA's ``prometheus`` scaler on the workload's own ``demand``
    query (``AverageValue``, as simulated); the forecast from prewarm's ``metrics-api``, or,
    with ``min_replicas`` 0, from its ``external-push`` scaler, whose ``StreamIsActive``
    wakes the workload by the registered activation rule as the backtest simulated it (at
    KEDA's default polling interval and cooldown, written out). KEDA metadata values are
    plain decimals, not Quantity strings.
    """
    from forecaster.activation import DEFAULT_COOLDOWN_SECONDS, DEFAULT_POLLING_SECONDS
    from forecaster.policies.autoscaler import hpa_spec

    placeholder = {"type": "External", "external": {"metric": {"name": "-"}}}
    spec = hpa_spec(policy, placeholder, placeholder)
    forecast_target, demand_target = (
        m["external"]["target"]["averageValue"] for m in spec["metrics"]
    )
    wakes = spec["minReplicas"] == 0
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name, "namespace": wiring.namespace},
        "spec": {
            "scaleTargetRef": {"name": name},
            # the activation phase the backtest simulates (forecaster.activation)
            **(
                {
                    "pollingInterval": int(DEFAULT_POLLING_SECONDS),
                    "cooldownPeriod": int(DEFAULT_COOLDOWN_SECONDS),
                }
                if wakes
                else {}
            ),
            "minReplicaCount": spec["minReplicas"],
            "maxReplicaCount": spec["maxReplicas"],
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": _behavior_quantities(spec["behavior"])
                }
            },
            "triggers": [
                (
                    _push_trigger(name, wiring.service)
                    if wakes
                    else _forecast_trigger(name, forecast_target, wiring.service)
                ),
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": prometheus_url,
                        "query": demand_query,
                        "threshold": _decimal(demand_target),
                    },
                },
            ],
        },
    }


def _forecast_trigger(name: str, forecast_target: float, service: str) -> dict[str, Any]:
    return {
        "type": "metrics-api",
        "metricType": "AverageValue",
        "metadata": {
            "url": f"https://{host(service)}:{HTTPS_PORT}/v1/workloads/{name}/forecast",
            "format": "json",
            "valueLocation": "forecastDemand",
            "targetValue": _decimal(forecast_target),
            "authMode": "bearer",
        },
        "authenticationRef": {"name": BEARER.name},
    }


def _push_trigger(name: str, service: str) -> dict[str, Any]:
    """prewarm's gRPC scaler: ``GetMetricSpec`` answers the registered forecast target."""
    return {
        "type": "external-push",
        "metricType": "AverageValue",
        "metadata": {
            "scalerAddress": f"{host(service)}:{GRPC_PORT}",
            "workload": name,
            "metric": "forecast_demand",
            "activationThreshold": "0",
        },
        "authenticationRef": {"name": GRPC.name},
    }


def _deployment(name: str) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}


def _behavior_quantities(behavior: Mapping[str, Any]) -> dict[str, Any]:
    """``behavior`` with each direction's ``tolerance`` as a Quantity string."""
    return {
        direction: {
            **rules,
            **({"tolerance": _quantity(rules["tolerance"])} if "tolerance" in rules else {}),
        }
        for direction, rules in behavior.items()
    }


def _milli(value: float) -> Decimal:
    """``value`` as the HPA reads it: whole milli-units, rounded up (``MilliValue()``).

    Rounding first to 1e-6 milli drops float noise (4 x 0.01 is 0.04000000000000001, which
    the HPA would read as 41m).

    Raises
    ------
    ConfigError
        ``value`` is above 0 and below one milli-unit: the HPA would read 1m, many times it
        (or a zero target the API server refuses), not what the backtest simulated.
    """
    from forecaster.exceptions import ConfigError

    if 0 < value < 0.001:
        raise ConfigError(
            f"a target or tolerance of {value:g} is below the 0.001 (1m) an HPA reads: raise "
            "capacity_per_replica (or the utilization), or state demand in a smaller unit"
        )
    return Decimal(math.ceil(round(value * 1000, 6))) / 1000


def _quantity(value: float) -> str:
    from serving.wire.quantity import format_quantity

    return format_quantity(_milli(value))


def _decimal(value: float) -> str:
    """A KEDA metadata number (parsed as a float, then kept to milli-units)."""
    return format(_milli(value).normalize(), "f")


def to_yaml(document: Mapping[str, Any], header: str) -> str:
    """YAML of ``document`` under ``header`` (comment lines), the tolerance fields annotated
    with the Kubernetes version they need."""
    import yaml

    body = yaml.safe_dump(dict(document), sort_keys=False, width=100)
    body = re.sub(r"^(\s*tolerance: .*)$", rf"\1  # {TOLERANCE_NOTE}", body, flags=re.MULTILINE)
    comments = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
    return comments + body


def header(name: str, policy: WorkloadPolicy, origin: str, kind: Kind) -> str:
    """Where the numbers of workload ``name``'s manifest come from."""
    settings = ", ".join(f"{k}={v:g}" for k, v in policy.settings().items())
    spec = policy.spec
    return (
        f"Rendered by `prewarm manifests --kind {kind}` for workload {name}: the autoscaler the\n"
        f"backtest simulates for the policy in {origin}.\n"
        f"Policy: {settings}; capacity_per_replica={spec.capacity_per_replica:g}.\n"
        f"Forecast target = capacity_per_replica x forecast_utilization, demand target =\n"
        f"capacity_per_replica x target_utilization; behavior as simulated (Kubernetes\n"
        f"defaults). Re-render after each promotion; do not edit the numbers by hand."
    )


# A Kubernetes object's name: a DNS subdomain (RFC 1123), as the API server checks it.
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _check_object(name: str, policy: WorkloadPolicy, kind: Kind) -> None:
    """Refuse what the API server would refuse of workload ``name``'s object (prewarm's own
    names also take ``_``, which Prometheus labels do and Kubernetes names do not)."""
    from forecaster.exceptions import ConfigError

    if len(name) > 253 or not _OBJECT_NAME.match(name):
        raise ConfigError(
            f"workload {name!r} is no Kubernetes object name (lower-case letters, digits, '-' "
            "and '.', a letter or digit at each end and beside each '.'): the API server "
            "would refuse its autoscaler; name the workload as its Deployment is named"
        )
    if kind == "hpa" and policy.spec.min_replicas == 0:
        raise ConfigError(
            f"workload {name!r} has min_replicas 0, which an HPA takes only with the alpha "
            "feature gate HPAScaleToZero: render it with `--kind keda`, which wakes it from "
            "zero, or set min_replicas to 1"
        )


def render(
    config: TrainConfig, policies: Policies, kind: Kind, demand_metric: str, shards: int = 1
) -> dict[str, str]:
    """File name -> YAML text, one file per workload, each in the workload's namespace (the
    only one under which prewarm serves its metric); with ``shards`` > 1, each KEDA trigger
    reads the Service of the shard that holds its workload (``prewarm-serve-K``). With
    ``kind`` ``keda``, also one file per namespace of the TriggerAuthentications its
    ScaledObjects name (``<namespace>.triggerauthentication.yaml``)."""
    from forecaster.exceptions import ConfigError, check_whole, shown
    from training.config import PrometheusSourceConfig
    from training.redaction import redact

    check_whole("--shards", shards, 1, MAX_SHARDS)  # what `prewarm serve --shard K/N` takes
    if demand_metric in ("", ".", "..") or any(c in demand_metric for c in "/%"):
        # What the API server checks of an HPA's metric name: it is a path segment.
        raise ConfigError(
            "`--demand-metric` must be a metric name the Kubernetes API accepts (not empty, "
            f"'.' or '..', without '/' or '%'), got {shown(demand_metric)}"
        )
    if kind == "hpa" and shards > 1:
        raise ConfigError(
            "`--shards` routes each KEDA trigger to its shard's Service; the HPA reads the "
            "cluster's one External Metrics API Service, which cannot be sharded: use "
            "`--kind keda`, or serve the HPA's workloads unsharded"
        )

    if kind == "keda" and not isinstance(config.source, PrometheusSourceConfig):
        raise ConfigError(
            "`--kind keda` reads each workload's demand with KEDA's prometheus scaler on its "
            f"`demand` query: `source.type` must be 'prometheus', got {config.source.type!r}"
        )
    url = config.source.url if isinstance(config.source, PrometheusSourceConfig) else ""
    if kind == "keda" and redact(url) != url:
        # The URL goes into a manifest as the trigger's serverAddress, in the clear.
        raise ConfigError(
            "`source.url` carries credentials, which a ScaledObject would hold in the clear: "
            f"give it without them ({redact(url)}) and authenticate KEDA's prometheus "
            "trigger with a TriggerAuthentication"
        )
    files = {}
    auths: dict[str, set[str]] = {}  # namespace -> the TriggerAuthentications named there
    for workload in config.workloads:
        policy = policies.by_workload[workload.name]
        _check_object(workload.name, policy, kind)
        wiring = Wiring(workload.namespace, demand_metric, service_of(workload.name, shards))
        try:
            if kind == "hpa":
                document = hpa_manifest(workload.name, policy, wiring)
                suffix = "hpa"
            else:
                assert isinstance(config.source, PrometheusSourceConfig)  # checked above
                document = scaled_object(
                    workload.name, policy, wiring, str(config.source.url), str(workload.demand)
                )
                suffix = "scaledobject"
        except ConfigError as exc:
            raise ConfigError(f"workload {workload.name!r}: {exc}") from exc
        text = to_yaml(document, header(workload.name, policy, policies.origin, kind))
        files[f"{workload.name}.{suffix}.yaml"] = text
        for trigger in document["spec"].get("triggers", []):
            if "authenticationRef" in trigger:
                auths.setdefault(workload.namespace, set()).add(
                    trigger["authenticationRef"]["name"]
                )
    for namespace, names in sorted(auths.items()):
        files[f"{namespace}.triggerauthentication.yaml"] = trigger_auths(namespace, sorted(names))
    return files


def trigger_auths(namespace: str, names: list[str]) -> str:
    """YAML of the TriggerAuthentications ``names`` (of :data:`TRIGGER_AUTHS`) in
    ``namespace``, under a header naming the Secret each reads."""
    chosen = [TRIGGER_AUTHS[name] for name in names]
    secrets = "\n".join(
        f"- {a.name}: Secret {a.secret} ({', '.join(a.keys.values())}), from {a.source}"
        for a in chosen
    )
    head = (
        "Rendered by `prewarm manifests --kind keda`: the TriggerAuthentications the\n"
        f"ScaledObjects of namespace {namespace} name. Each reads a Secret of this namespace,\n"
        'made from the install\'s own Secrets as docs/install.md ("With KEDA") shows:\n'
        f"{secrets}"
    )
    return "---\n".join(
        to_yaml(a.manifest(namespace), head if i == 0 else "") for i, a in enumerate(chosen)
    )


@click.command(
    epilog=epilog(
        OK="manifests written",
        FAILURE="MLflow store unreadable, or a file could not be written",
        CONFIG="bad configuration",
    )
)
@config_option()
@click.option(
    "--out",
    "out_dir",
    default=Path("manifests"),
    show_default=True,
    type=OutputFolder(),
    help="Folder the manifests are written to.",
)
@tracking_uri_option()
@click.option(
    "--kind",
    type=click.Choice(["hpa", "keda"]),
    default="hpa",
    show_default=True,
    help="A HorizontalPodAutoscaler, or a KEDA ScaledObject.",
)
@click.option(
    "--demand-metric",
    default="workload_demand",
    show_default=True,
    help="Custom metric (custom.metrics.k8s.io, on each Deployment) of the demand (--kind hpa).",
)
@click.option(
    "--shards",
    type=int,
    default=1,
    show_default=True,
    help=f"Serving shards, 1 to {MAX_SHARDS} (`prewarm serve --shard K/N`): each KEDA "
    "trigger reads the Service prewarm-serve-K of the shard that holds its workload "
    "(--kind keda).",
)
def manifests(
    config_path: Path,
    out_dir: Path,
    tracking_uri: str | None,
    kind: Kind,
    demand_metric: str,
    shards: int,
) -> None:
    """Write each workload's HPA (or KEDA ScaledObject) exactly as the backtest simulated it."""
    from forecaster.exceptions import PrewarmError
    from training.config import load_config
    from training.settings import resolve_tracking_uri

    try:
        config = load_config(config_path)
        uri = resolve_tracking_uri(tracking_uri, config.mlflow.tracking_uri)
        policies = resolve_policies(config, config_path, uri)
        files = render(config, policies, kind, demand_metric, shards)
    except PrewarmError as exc:
        fail(str(exc), exit_code(exc))
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for file_name, text in files.items():
            (out_dir / file_name).write_text(text)
    except OSError as exc:
        fail(f"cannot write to {str(out_dir)!r}: {exc.strerror}", ExitCode.FAILURE)
    click.echo(f"Policies from {policies.origin}.")
    for file_name in files:
        click.echo(f"Wrote {out_dir / file_name}")
