"""``kubectl apply -k deploy/`` and its overlays: every install renders with ``kubectl
kustomize``, every built-in object validates against the Kubernetes schemas, and the pieces
agree with each other (one image, one config, the MLflow server both sides reach, TLS,
the APIService, the disruption budget and the network policies)."""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from prewarm.certs import APISERVICE_CHECK, APPLY, issue, new_ca, secret_manifest
from prewarm.services import NAMESPACE, SERVICE, host, service_names
from prewarm.train import train
from serving.wire import k8s
from tests.deploy.rendered import (
    DEPLOY,
    INSTALLS,
    ROOT,
    SERVE,
    Object,
    container,
    kustomize,
    named,
    one,
    pod_spec,
    render,
)
from training.config import parse_config

# cert-manager's Issuer and Certificate are custom resources: kubernetes-validate has no
# schema for them and no CRD schema is available offline, so their schema is not checked
# here; test_certificates_serve_the_service_names checks the fields the install relies on.
CUSTOM_GROUPS = {"cert-manager.io"}
CONFIG_PATH = "/etc/prewarm/prewarm.yaml"
IMAGE_REPOSITORY = "ghcr.io/prewarm/prewarm"


def _version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def _workloads(objects: list[Object]) -> list[Object]:
    return named(objects, "Deployment") + named(objects, "CronJob")


@pytest.mark.parametrize("install", INSTALLS)
def test_each_install_renders_and_every_built_in_object_validates(install: str) -> None:
    objects = render(install)
    checked = 0
    for obj in objects:
        if obj["apiVersion"].split("/")[0] in CUSTOM_GROUPS:
            continue
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
        checked += 1
    assert checked >= 15, f"only {checked} built-in objects rendered"
    # Everything namespaced lands in the install's namespace, which the install creates.
    assert one(objects, "Namespace")["metadata"]["name"] == "prewarm"
    for obj in objects:
        if obj["kind"] not in {"Namespace", "APIService"}:
            assert obj["metadata"].get("namespace") == "prewarm", obj["metadata"]["name"]


def test_the_default_install_is_the_hpa_overlay() -> None:
    assert render(".") == render("overlays/hpa")


@pytest.mark.parametrize("install", INSTALLS)
def test_one_image_everywhere_and_it_is_the_dockerfile_s(install: str) -> None:
    objects = render(install)
    images = {container(w)["image"] for w in _workloads(objects)}
    kinds = sorted(f"{w['kind']}/{w['metadata']['name']}" for w in _workloads(objects))
    assert kinds == ["CronJob/prewarm-train", "Deployment/mlflow", "Deployment/prewarm-serve"]
    assert images == {f"{IMAGE_REPOSITORY}:{_version()}"}


def _final_stage(dockerfile: str) -> tuple[int, str]:
    stages = re.split(r"^FROM\s", dockerfile, flags=re.MULTILINE)
    return len(stages) - 1, stages[-1]


def test_dockerfile_is_multi_stage_non_root_with_libgomp_and_oci_labels() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    count, final = _final_stage(text)
    assert count >= 2 and "COPY --from=build /opt/prewarm /opt/prewarm" in final
    assert re.search(r"apt-get install [^\n]*\blibgomp1\b", final), "libgomp1 not installed"
    # The one image also runs the Dask workers and `--dask-scheduler` (docs/scale.md).
    assert re.search(r"pip install [^\n]*'\.\[dask\]'", text), "the dask extra is not installed"
    (user,) = re.findall(r"^USER\s+(\S+)", final, flags=re.MULTILINE)
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric: runAsNonRoot can verify it
    for workload in _workloads(render(".")):
        assert pod_spec(workload)["securityContext"]["runAsUser"] == int(uid)
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z.]+)="([^"]*)"', final))
    (default_version,) = re.findall(r"^ARG VERSION=(\S+)", final, flags=re.MULTILINE)
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    assert default_version == _version()
    for key in ("title", "description", "source", "licenses", "revision"):
        assert labels[f"org.opencontainers.image.{key}"], key
    # The image name the manifests use is the source repository's registry name.
    source = urlsplit(labels["org.opencontainers.image.source"])
    assert source.netloc == "github.com"
    assert f"ghcr.io{source.path}" == IMAGE_REPOSITORY
    assert f"-t {IMAGE_REPOSITORY}:{_version()}" in text  # the build command it documents


def test_dockerfile_copies_what_the_package_data_links_to() -> None:
    copied = {
        part
        for line in (DEPLOY / "Dockerfile").read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for part in line.split()[1:-1]
    }
    links = [p for p in (ROOT / "prewarm").rglob("*") if p.is_symlink()]
    assert links, "prewarm/_demo links to examples/ and data/"
    for link in links:
        target = link.resolve().relative_to(ROOT)
        assert str(target) in copied or target.parts[0] in copied, target


@pytest.mark.parametrize("install", INSTALLS)
def test_serving_survives_a_node_drain(install: str) -> None:
    objects = render(install)
    serve = one(objects, "Deployment", "prewarm-serve")
    assert serve["spec"]["replicas"] >= 2
    assert serve["spec"]["selector"]["matchLabels"] == SERVE
    spread = pod_spec(serve)["affinity"]["podAntiAffinity"]
    (term,) = spread["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == SERVE
    # The budget keeps one replica through voluntary disruptions and still lets a drain
    # proceed (minAvailable below the replica count).
    budget = one(objects, "PodDisruptionBudget")
    assert budget["spec"]["selector"]["matchLabels"] == SERVE
    assert 1 <= budget["spec"]["minAvailable"] < serve["spec"]["replicas"]


def _policy_for(objects: list[Object], component: str, direction: str) -> list[Any]:
    """Every rule of ``direction`` (ingress/egress) in the policies selecting ``component``."""
    rules = []
    for policy in named(objects, "NetworkPolicy"):
        spec = policy["spec"]
        if direction.capitalize() not in spec["policyTypes"]:
            continue
        selector = spec["podSelector"]
        labels = selector.get("matchLabels", {})
        expressions = selector.get("matchExpressions", [])
        selects = labels.get("app.kubernetes.io/component", component) == component and all(
            e["key"] != "app.kubernetes.io/component" or component in e["values"]
            for e in expressions
        )
        if selects and (labels or expressions):
            rules += spec.get(direction, [])
    return rules


def _ports(rules: list[Any]) -> set[int]:
    return {p["port"] for rule in rules for p in rule.get("ports", [])}


def _peers(rules: list[Any]) -> list[str]:
    """Each peer as ``namespace:<name>``, ``pods:<component>`` or ``cidr:<block>``."""
    out = []
    for rule in rules:
        for peer in rule.get("from", []) + rule.get("to", []):
            if "ipBlock" in peer:
                out.append(f"cidr:{peer['ipBlock']['cidr']}")
            elif "namespaceSelector" in peer:
                ns = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                out.append(f"namespace:{ns}")
            else:
                out.append(
                    f"pods:{peer['podSelector']['matchLabels']['app.kubernetes.io/component']}"
                )
    return sorted(out)


@pytest.mark.parametrize("install", INSTALLS)
def test_network_policies_admit_only_what_prewarm_needs(install: str) -> None:
    objects = render(install)
    deny = one(objects, "NetworkPolicy", "default-deny")["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    # Serving and training reach Prometheus, MLflow and DNS, nothing else.
    for component in ("serve", "training"):
        egress = _policy_for(objects, component, "egress")
        assert _peers(egress) == ["namespace:kube-system", "namespace:monitoring", "pods:mlflow"]
        assert _ports(egress) == {53, 9090, 5000}
    # MLflow: reached by serving and training only, reaches nothing.
    assert _peers(_policy_for(objects, "mlflow", "ingress")) == ["pods:serve", "pods:training"]
    assert _ports(_policy_for(objects, "mlflow", "ingress")) == {5000}
    assert _policy_for(objects, "mlflow", "egress") == []
    assert _policy_for(objects, "training", "ingress") == []
    # Serving: its HTTPS port for the API server and Prometheus; gRPC only for KEDA.
    ingress = _policy_for(objects, "serve", "ingress")
    https_only = [r for r in ingress if _ports([r]) == {8443}]
    assert _peers(https_only) == ["cidr:0.0.0.0/0", "namespace:monitoring"]
    keda = [r for r in ingress if 9000 in _ports([r])]
    if install == "overlays/keda":
        assert _peers(keda) == ["namespace:keda"] and _ports(keda) == {8443, 9000}
    else:
        assert keda == []


@pytest.mark.parametrize("install", INSTALLS)
def test_training_and_serving_share_one_config_and_the_mlflow_server(install: str) -> None:
    objects = render(install)
    (configmap,) = named(objects, "ConfigMap")
    config = parse_config(yaml.safe_load(configmap["data"]["prewarm.yaml"]))
    for workload in (one(objects, "Deployment", "prewarm-serve"), one(objects, "CronJob")):
        pod, main = pod_spec(workload), container(workload)
        assert pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod["volumes"]}
        mount = next(m for m in main["volumeMounts"] if m["mountPath"] == CONFIG_PATH)
        assert volumes[mount["name"]]["configMap"]["name"] == configmap["metadata"]["name"]
        assert f"--config={CONFIG_PATH}" in main["args"] or CONFIG_PATH in main["args"]
        assert not any("persistentVolumeClaim" in v for v in pod["volumes"])
    (job,) = [container(one(objects, "CronJob"))]
    assert job["args"][:3] == ["train", "--config", CONFIG_PATH]
    # the nightly run as `prewarm train` parses it: tuned, its backtests bounded
    options = train.make_context("train", job["args"][1:]).params
    assert options["tune"] and options["tune_limit"] == 70

    # The tracking URI is the MLflow Service of the install, over HTTP.
    uri = urlsplit(config.mlflow.tracking_uri)
    host, _, namespace_svc = (uri.hostname or "").partition(".")
    assert uri.scheme == "http" and namespace_svc == "prewarm.svc"
    service = one(objects, "Service", host)
    assert uri.port in {p["port"] for p in service["spec"]["ports"]}
    mlflow = one(objects, "Deployment", host)
    assert service["spec"]["selector"] == mlflow["spec"]["selector"]["matchLabels"]
    server = container(mlflow)
    assert server["command"] == ["mlflow"] and server["args"][0] == "server"
    assert "--serve-artifacts" in server["args"]
    (allowed,) = [a.split("=", 1)[1] for a in server["args"] if a.startswith("--allowed-hosts=")]
    assert f"{uri.hostname}:{uri.port}" in allowed.split(",")
    # SQLite has one writer: one pod, never two at once, the only one with the volume.
    assert mlflow["spec"]["replicas"] == 1 and mlflow["spec"]["strategy"]["type"] == "Recreate"
    (claim,) = [v for v in pod_spec(mlflow)["volumes"] if "persistentVolumeClaim" in v]
    assert one(objects, "PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])


@pytest.mark.parametrize("install", INSTALLS)
def test_every_pod_is_locked_down(install: str) -> None:
    objects = render(install)
    for workload in _workloads(objects):
        pod, main = pod_spec(workload), container(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        assert main["securityContext"]["readOnlyRootFilesystem"] is True
        assert main["securityContext"]["allowPrivilegeEscalation"] is False
        assert main["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert {"requests", "limits"} <= set(main["resources"])
    serve = container(one(objects, "Deployment", "prewarm-serve"))
    assert serve["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert serve["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # No pod calls the Kubernetes API, so none is granted anything.
    assert not named(objects, "ClusterRoleBinding") and not named(objects, "RoleBinding")


def _serving_certificate(objects: list[Object]) -> Object:
    serve = one(objects, "Deployment", "prewarm-serve")
    volumes = {v["name"]: v for v in pod_spec(serve)["volumes"]}
    secret = volumes["tls"]["secret"]["secretName"]
    (certificate,) = [c for c in named(objects, "Certificate") if c["spec"]["secretName"] == secret]
    return certificate


@pytest.mark.parametrize("install", INSTALLS)
def test_certificates_serve_the_service_names(install: str) -> None:
    objects = render(install)
    certificate = _serving_certificate(objects)["spec"]
    assert {"prewarm-serve.prewarm.svc", "prewarm-serve.prewarm.svc.cluster.local"} <= set(
        certificate["dnsNames"]
    )
    assert "server auth" in certificate["usages"]
    # issued by a CA issuer whose root is a self-signed CA certificate of the install
    issuer = one(objects, "Issuer", certificate["issuerRef"]["name"])
    root = one(objects, "Certificate", issuer["spec"]["ca"]["secretName"])
    assert root["spec"]["isCA"] is True
    assert "selfSigned" in one(objects, "Issuer", root["spec"]["issuerRef"]["name"])["spec"]


def test_hpa_install_registers_the_apiservice_with_an_injected_ca_and_front_proxy_auth() -> None:
    objects = render("overlays/hpa")
    api = one(objects, "APIService")
    assert api["metadata"]["name"] == f"{k8s.VERSION}.{k8s.GROUP}"
    spec = api["spec"]
    assert (spec["group"], spec["version"]) == (k8s.GROUP, k8s.VERSION)
    assert "insecureSkipTLSVerify" not in spec and "caBundle" not in spec
    certificate = _serving_certificate(objects)
    injected = api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert injected == f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    service = one(objects, "Service", spec["service"]["name"])
    assert spec["service"]["namespace"] == service["metadata"]["namespace"]
    assert spec["service"]["port"] in {p["port"] for p in service["spec"]["ports"]}
    # The aggregator's client certificate is checked against the front-proxy CA and names.
    deployment = one(objects, "Deployment", "prewarm-serve")
    serve = container(deployment)
    (client_ca,) = [a.split("=", 1)[1] for a in serve["args"] if a.startswith("--client-ca=")]
    mount = next(m for m in serve["volumeMounts"] if client_ca.startswith(m["mountPath"] + "/"))
    volumes = {v["name"]: v for v in pod_spec(deployment)["volumes"]}
    front_proxy = volumes[mount["name"]]["configMap"]
    assert client_ca.endswith("/" + front_proxy["items"][0]["path"])
    names = next(e for e in serve["env"] if e["name"] == "PREWARM_REQUESTHEADER_ALLOWED_NAMES")
    assert names["valueFrom"]["configMapKeyRef"] == {
        "name": front_proxy["name"],
        "key": "requestheader-allowed-names",
    }


def test_install_md_checks_who_serves_the_apiservice_before_each_install_replacing_it() -> None:
    # prometheus-adapter, Datadog or KEDA's metrics server may own the group already: the
    # default install and the `prewarm certs` folder replace their APIService
    text = (ROOT / "docs" / "install.md").read_text()
    for install in ("kubectl apply -k deploy/\n", f"{APPLY} -k prewarm-install\n"):
        places = [m.start() for m in re.finditer(re.escape(install), text)]
        assert places, install
        for at in places:
            # the folder of `prewarm certs --kind keda` registers no APIService: nothing to
            # check before it, and none is checked between writing it and applying it
            written = text.rfind("prewarm certs ", 0, at)
            if text[written : text.index("\n", written)].split()[2:4] == ["--kind", "keda"]:
                assert APISERVICE_CHECK not in text[written:at], at
                continue
            # the check comes before this install line within its own section: a check
            # in an earlier section does not count
            section = text.rfind("\n## ", 0, at)
            assert section < text.rfind(APISERVICE_CHECK, 0, at), (install, at)
    assert re.search(r"^prewarm certs --kind keda --out prewarm-install ", text, re.MULTILINE)
    assert named(render("."), "APIService") and named(render("overlays/keda"), "APIService") == []
    # and what to do when it is KEDA's: the overlay that leaves it alone
    flowing = " ".join(text.split())
    assert "use [the KEDA overlay](#with-keda), which registers no APIService" in flowing


@pytest.mark.parametrize("install", INSTALLS)
def test_every_install_asks_for_the_token_but_on_the_aggregator_s_paths(install: str) -> None:
    # the HPA-only install had none: its KEDA routes, /v1/workloads and explain answered
    # any pod reaching 8443, which the NetworkPolicy must admit from any address
    serve = one(render(install), "Deployment", "prewarm-serve")
    main = container(serve)
    token_file = next(e["value"] for e in main["env"] if e["name"] == "PREWARM_TOKEN_FILE")
    mount = next(m for m in main["volumeMounts"] if token_file.startswith(m["mountPath"] + "/"))
    volumes = {v["name"]: v for v in pod_spec(serve)["volumes"]}
    assert volumes[mount["name"]]["secret"] == {
        "secretName": "prewarm-serve-token",
        "defaultMode": 0o400,
    }


def test_keda_install_leaves_the_apiservice_to_keda_and_authenticates_keda() -> None:
    objects = render("overlays/keda")
    assert named(objects, "APIService") == []
    serve = one(objects, "Deployment", "prewarm-serve")
    main = container(serve)
    # KEDA's gRPC scaler presents a client certificate of the install's CA, and serving
    # verifies client certificates against that CA: the ca.crt beside its own certificate.
    (client_ca,) = [a.split("=", 1)[1] for a in main["args"] if a.startswith("--client-ca=")]
    tls = next(m for m in main["volumeMounts"] if m["name"] == "tls")
    assert client_ca == f"{tls['mountPath']}/ca.crt"
    serving = _serving_certificate(objects)
    client = one(objects, "Certificate", "prewarm-grpc-client")["spec"]
    assert client["issuerRef"] == serving["spec"]["issuerRef"]
    assert "client auth" in client["usages"] and "server auth" not in client["usages"]


# What the KEDA overlay adds to deploy/base, written out: deploy/components/keda (shared
# with the folder `prewarm certs --kind keda` writes) and cert-manager's certificates.
KEDA_SERVE_ADDITIONS = {"args": ["--client-ca=/etc/prewarm/tls/ca.crt"]}
KEDA_NETWORK_POLICY = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "prewarm-serve-keda", "namespace": "prewarm"},
    "spec": {
        "podSelector": {"matchLabels": SERVE},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}}
                ],
                "ports": [{"port": 8443, "protocol": "TCP"}, {"port": 9000, "protocol": "TCP"}],
            }
        ],
    },
}


def _key(obj: Object) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def test_the_keda_overlay_is_the_base_with_keda_s_access_and_its_certificates() -> None:
    # Pins the overlay's render in substance, whatever components it is made of: deploy/base
    # with the serving Deployment patched for KEDA and the NetworkPolicy for KEDA, plus
    # cert-manager's objects (the HPA overlay's) and the gRPC client's Certificate.
    base = {_key(o): o for o in kustomize(DEPLOY / "base")}
    serve = base[("Deployment", "prewarm-serve")]
    pod = serve["spec"]["template"]["spec"]
    main = pod["containers"][0]
    for field, added in KEDA_SERVE_ADDITIONS.items():
        main[field] = main[field] + added
    cert_manager = {
        _key(o): o for o in render("overlays/hpa") if o["apiVersion"].startswith("cert-manager.io")
    }
    client = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "prewarm-grpc-client", "namespace": "prewarm"},
        "spec": {
            "secretName": "prewarm-grpc-client",
            "commonName": "keda",
            "duration": "2160h",
            "renewBefore": "720h",
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["client auth", "digital signature", "key encipherment"],
            "issuerRef": {"name": "prewarm-ca", "kind": "Issuer"},
        },
    }
    expected = base | cert_manager | {_key(client): client}
    expected[_key(KEDA_NETWORK_POLICY)] = KEDA_NETWORK_POLICY
    rendered = render("overlays/keda")
    assert len(rendered) == len(expected)
    assert {_key(o): o for o in rendered} == expected


@pytest.mark.parametrize("install", ["overlays/hpa", "overlays/keda"])
def test_the_prometheus_operator_component_scrapes_serving_over_verified_https(
    install: str, tmp_path: Path
) -> None:
    # An overlay of the user's own: an install plus the optional component.
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({
            "resources": [os.path.relpath(DEPLOY / install, tmp_path)],
            "components": [os.path.relpath(DEPLOY / "components/prometheus-operator", tmp_path)],
        })
    )  # fmt: skip
    objects = kustomize(tmp_path)
    monitor = one(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    spec = monitor["spec"]
    # It selects the serving Service, in its own namespace (no namespaceSelector)...
    service = one(objects, "Service", "prewarm-serve")
    selected = [s for s in named(objects, "Service") if _selects(spec["selector"], s)]
    assert selected == [service] and "namespaceSelector" not in spec
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == "prewarm"
    # ...and scrapes /metrics over HTTPS on its port that reaches serving's HTTPS port.
    (endpoint,) = spec["endpoints"]
    assert (endpoint["path"], endpoint["scheme"]) == ("/metrics", "https")
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    serve = one(objects, "Deployment", "prewarm-serve")
    (target,) = [p for p in container(serve)["ports"] if p["name"] == port["targetPort"]]
    assert target["containerPort"] == 8443
    ingress = _policy_for(objects, "serve", "ingress")
    from_prometheus = [r for r in ingress if "namespace:monitoring" in _peers([r])]
    assert target["containerPort"] in _ports(from_prometheus)
    # The certificate is verified: the CA of the Secret serving presents, under a name the
    # certificate holds (Prometheus connects to pod addresses, which it does not).
    tls = endpoint["tlsConfig"]
    assert not tls.get("insecureSkipVerify")
    volumes = {v["name"]: v for v in pod_spec(serve)["volumes"]}
    assert tls["ca"]["secret"] == {"name": volumes["tls"]["secret"]["secretName"], "key": "ca.crt"}
    assert "ca.crt" in secret_manifest(*_issued(), NAMESPACE)["data"]  # prewarm certs' Secret
    assert tls["serverName"] == host(SERVICE)
    assert tls["serverName"] in _serving_certificate(objects)["spec"]["dnsNames"]
    # The scrape annotations are gone: a Prometheus honouring both would scrape twice.
    annotations = serve["spec"]["template"]["metadata"].get("annotations", {})
    assert not [a for a in annotations if a.startswith("prometheus.io/")]
    for obj in objects:
        if obj["apiVersion"].split("/")[0] not in CUSTOM_GROUPS | {"monitoring.coreos.com"}:
            kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def _selects(selector: Object, obj: Object) -> bool:
    labels = obj["metadata"].get("labels", {})
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _issued() -> tuple[Any, Any]:
    """A CA and a server certificate it signs, as ``prewarm certs`` makes them."""
    now = dt.datetime.now(dt.UTC)
    ca = new_ca("test CA", now)
    return ca, issue(ca, host(SERVICE), now, dns_names=service_names(SERVICE))


def test_the_overlay_install_md_gives_for_the_component_renders_as_written(
    tmp_path: Path,
) -> None:
    text = (ROOT / "docs" / "install.md").read_text()
    (block,) = [
        b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL) if "prometheus-operator" in b
    ]
    # beside a checkout named prewarm, as the block's paths assume
    (tmp_path / "prewarm").symlink_to(ROOT, target_is_directory=True)
    (tmp_path / "my-prewarm").mkdir()
    (tmp_path / "my-prewarm" / "kustomization.yaml").write_text(block)
    objects = kustomize(tmp_path / "my-prewarm")
    for kind in ("ServiceMonitor", "PrometheusRule"):  # both selected by the label
        assert one(objects, kind, "prewarm-serve")["metadata"]["labels"]["release"] == (
            "kube-prometheus-stack"
        )
    # deploy/ (the default install), and the ServiceMonitor and its alerts besides
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert kinds == {(o["kind"], o["metadata"]["name"]) for o in render(".")} | {
        ("ServiceMonitor", "prewarm-serve"),
        ("PrometheusRule", "prewarm-serve"),
    }
