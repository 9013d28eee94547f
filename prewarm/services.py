"""Where ``prewarm serve`` is reached in the cluster: the Service of each shard, and the DNS
names clients use for it.

One place for these names: ``prewarm manifests`` points KEDA's triggers at them and
``prewarm certs`` writes them into the serving certificate, so every trigger's host is a name
the certificate holds (tests/deploy/test_certs.py renders both and checks it).
"""

from __future__ import annotations

from serving.shards import shard_of

SERVICE = "prewarm-serve"  # deploy/base/serve-service.yaml; shard K of N: prewarm-serve-K
NAMESPACE = "prewarm"  # deploy/base/namespace.yaml
HTTPS_PORT = 443  # the Service's `https` port: the APIService and KEDA's metrics-api trigger
GRPC_PORT = 9000  # its `grpc` port: KEDA's external-push scaler
# The install's Secrets in NAMESPACE: the serving pair (with ca.crt, as cert-manager writes
# it), the bearer token serving asks for (deploy/base mounts it), and KEDA's gRPC
# scaler's client certificate (deploy/overlays/keda's Certificate names it so; its copy in
# each workload namespace keeps the name).
SERVING_SECRET = "prewarm-serve-tls"
TOKEN_SECRET = "prewarm-serve-token"
CLIENT_SECRET = "prewarm-grpc-client"


def shard_service(shard: int) -> str:
    """The Service of shard ``shard`` (1-based) of a sharded fleet: ``prewarm-serve-K``."""
    return f"{SERVICE}-{shard}"


def service_of(workload: str, shards: int = 1) -> str:
    """The Service of the ``prewarm serve`` that holds ``workload`` among ``shards`` shards:
    ``prewarm-serve``, or ``prewarm-serve-K`` for shard K of a sharded fleet."""
    return SERVICE if shards == 1 else shard_service(shard_of(workload, shards))


def fleet_services(shards: int = 1) -> list[str]:
    """Every Service of a fleet of ``shards`` shards: ``prewarm-serve`` (the one behind the
    APIService, which cannot be sharded) and, sharded, ``prewarm-serve-1`` to ``-N``."""
    return [SERVICE] + ([shard_service(k) for k in range(1, shards + 1)] if shards > 1 else [])


def host(service: str, namespace: str = NAMESPACE) -> str:
    """The host name a client in the cluster reaches ``service`` by: ``<service>.<namespace>.svc``.

    Not ``...svc.cluster.local``: the cluster domain differs between clusters, while the
    ``.svc`` form resolves through every pod's DNS search path on any of them.
    """
    return f"{service}.{namespace}.svc"


def service_names(service: str, namespace: str = NAMESPACE) -> list[str]:
    """Every DNS name a client in the cluster may use for ``service`` (``<service>``,
    ``<service>.<namespace>``, :func:`host` and its ``.cluster.local`` form)."""
    svc = host(service, namespace)
    return [service, f"{service}.{namespace}", svc, f"{svc}.cluster.local"]
