"""deploy/k8s validated offline: every Kubernetes object against the API's own schemas
(kubernetes-validate, strict: an unknown field fails), KEDA's objects against a model of
their CRD, and the manifests against each other and against sbx's settings."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictStr

from tests.helpers import REPO, require_module
from worker.settings import Settings, parse_address

require_module("kubernetes_validate", "pip install kubernetes-validate (the dev extra)")

import kubernetes_validate  # noqa: E402

K8S = REPO / "deploy" / "k8s"
VERSIONS = ("1.28.0", "1.33.0")  # the oldest supported and a recent release
KEDA_KINDS = {"ScaledObject", "TriggerAuthentication"}


def documents(name: str | None = None) -> list[dict[str, Any]]:
    files = [K8S / f"{name}.yaml"] if name else sorted(K8S.glob("*.yaml"))
    docs = []
    for path in files:
        if path.name == "kustomization.yaml":
            continue
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_kubernetes_object_matches_the_api_schema(version: str) -> None:
    checked = 0
    for doc in documents():
        if doc["kind"] in KEDA_KINDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 8


def test_the_schema_check_catches_a_misspelt_field() -> None:
    worker = copy.deepcopy(one("Deployment", "sbx-worker"))
    pod = worker["spec"]["template"]["spec"]
    pod["terminationGracePeriod"] = pod.pop("terminationGracePeriodSeconds")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, VERSIONS[-1], strict=True)


# -- KEDA (keda.sh/v1alpha1): the fields of its CRDs this deployment may use ------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Metadata(_Strict):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class SecretTargetRef(_Strict):
    parameter: str
    name: str
    key: str


class TriggerAuthenticationSpec(_Strict):
    secretTargetRef: list[SecretTargetRef]


class TriggerAuthentication(_Strict):
    apiVersion: Literal["keda.sh/v1alpha1"]
    kind: Literal["TriggerAuthentication"]
    metadata: Metadata
    spec: TriggerAuthenticationSpec


class ScaleTargetRef(_Strict):
    apiVersion: str | None = None
    kind: str | None = None
    name: str
    envSourceContainerName: str | None = None


class AuthenticationRef(_Strict):
    name: str
    kind: Literal["TriggerAuthentication", "ClusterTriggerAuthentication"] | None = None


REDIS_METADATA = {"address", "addressFromEnv", "host", "hostFromEnv", "port", "portFromEnv",
                  "listName", "listLength", "activationListLength", "databaseIndex",
                  "enableTLS", "unsafeSsl", "usernameFromEnv", "passwordFromEnv"}  # fmt: skip
PROMETHEUS_METADATA = {"serverAddress", "query", "threshold", "activationThreshold",
                       "namespace", "customHeaders", "ignoreNullValues", "unsafeSsl",
                       "queryParameters", "authModes"}  # fmt: skip
REDIS_AUTH_PARAMETERS = {"address", "host", "port", "username", "password", "tls", "ca",
                         "cert", "key"}  # fmt: skip


class Trigger(_Strict):
    type: Literal["redis", "prometheus"]
    name: str | None = None
    metadata: dict[str, StrictStr]  # KEDA reads every value as a string
    authenticationRef: AuthenticationRef | None = None
    metricType: Literal["AverageValue", "Value", "Utilization"] | None = None


class HpaConfig(_Strict):
    name: str | None = None
    behavior: dict[str, Any] | None = None


class Advanced(_Strict):
    restoreToOriginalReplicaCount: bool | None = None
    horizontalPodAutoscalerConfig: HpaConfig | None = None


class ScaledObjectSpec(_Strict):
    scaleTargetRef: ScaleTargetRef
    pollingInterval: int | None = Field(default=None, ge=1)
    cooldownPeriod: int | None = Field(default=None, ge=0)
    idleReplicaCount: int | None = Field(default=None, ge=0)
    minReplicaCount: int | None = Field(default=None, ge=0)
    maxReplicaCount: int | None = Field(default=None, ge=1)
    advanced: Advanced | None = None
    triggers: list[Trigger] = Field(min_length=1)


class ScaledObject(_Strict):
    apiVersion: Literal["keda.sh/v1alpha1"]
    kind: Literal["ScaledObject"]
    metadata: Metadata
    spec: ScaledObjectSpec


def test_keda_objects_match_their_crd_and_the_deployment() -> None:
    scaled = ScaledObject.model_validate(one("ScaledObject", "sbx-worker"))
    auth = TriggerAuthentication.model_validate(one("TriggerAuthentication", "sbx-redis"))
    spec = scaled.spec
    assert spec.scaleTargetRef.name == "sbx-worker" and spec.scaleTargetRef.kind == "Deployment"
    assert spec.minReplicaCount is not None and spec.maxReplicaCount is not None
    assert 1 <= spec.minReplicaCount <= spec.maxReplicaCount
    # Scale-down behaviour is an HPA behavior: the Kubernetes schema of it applies.
    behavior = spec.advanced.horizontalPodAutoscalerConfig.behavior  # type: ignore[union-attr]
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "check"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "name": "sbx-worker"},
                    "maxReplicas": 2, "behavior": behavior}}  # fmt: skip
    kubernetes_validate.validate(hpa, VERSIONS[-1], strict=True)
    by_type = {t.type: t for t in spec.triggers}
    redis_trigger, prom = by_type["redis"], by_type["prometheus"]
    assert set(redis_trigger.metadata) <= REDIS_METADATA
    assert set(prom.metadata) <= PROMETHEUS_METADATA
    # The list KEDA measures is the shared queue the workers consume.
    assert redis_trigger.metadata["listName"] == Settings.model_fields["queue"].default
    assert int(redis_trigger.metadata["listLength"]) >= 1
    assert redis_trigger.authenticationRef is not None
    assert redis_trigger.authenticationRef.name == auth.metadata.name
    assert {r.parameter for r in auth.spec.secretTargetRef} <= REDIS_AUTH_PARAMETERS
    assert {r.key for r in auth.spec.secretTargetRef} <= secret_keys()
    # The Prometheus query reads a metric the workers export.
    assert "sbx_calls_running" in prom.metadata["query"]
    float(prom.metadata["threshold"])


def test_a_keda_trigger_with_a_number_instead_of_a_string_is_caught() -> None:
    doc = copy.deepcopy(one("ScaledObject", "sbx-worker"))
    doc["spec"]["triggers"][0]["metadata"]["listLength"] = 5
    with pytest.raises(ValueError):
        ScaledObject.model_validate(doc)


# -- the manifests against each other and against sbx ----------------------------------------


def secret_keys() -> set[str]:
    return set(one("Secret", "sbx")["stringData"])


def worker_pod() -> dict[str, Any]:
    pod: dict[str, Any] = one("Deployment", "sbx-worker")["spec"]["template"]["spec"]
    return pod


def test_the_worker_pod_is_locked_down_and_stops_within_its_grace() -> None:
    pod = worker_pod()
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    grace = float(env["SBX_SHUTDOWN_GRACE"]["value"])
    assert pod["terminationGracePeriodSeconds"] >= grace + 10
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/sbx", "/tmp"} <= mounts  # the only writable places
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:2] == ["sbx", "health"], probe
        deadline = float(command[command.index("--timeout") + 1])
        assert container[probe]["timeoutSeconds"] > deadline, probe
    # Every SBX_* value given in the manifest is a valid setting.
    literal = {k[4:].lower(): e["value"] for k, e in env.items() if "value" in e}
    Settings(**literal)  # type: ignore[arg-type]
    assert all(k[4:].lower() in Settings.model_fields for k in env), sorted(env)
    refs = {e["valueFrom"]["secretKeyRef"]["key"] for e in env.values() if "valueFrom" in e}
    assert refs <= secret_keys()
    # Metrics: the port the worker binds is the one declared and the one the policy opens.
    _, port = parse_address(env["SBX_METRICS_ADDR"]["value"])
    assert [p["containerPort"] for p in container["ports"]] == [port]
    policy = one("NetworkPolicy", "sbx-worker")["spec"]
    assert [p["port"] for p in policy["ingress"][0]["ports"]] == [port]


def test_selectors_match_the_pods_they_mean() -> None:
    worker = one("Deployment", "sbx-worker")
    redis_deploy = one("Deployment", "sbx-redis")
    worker_labels = worker["spec"]["template"]["metadata"]["labels"]
    redis_labels = redis_deploy["spec"]["template"]["metadata"]["labels"]

    def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items())

    assert selects(worker["spec"]["selector"]["matchLabels"], worker_labels)
    assert selects(one("PodDisruptionBudget", "sbx-worker")["spec"]["selector"]["matchLabels"],
                   worker_labels)  # fmt: skip
    assert selects(one("NetworkPolicy", "sbx-worker")["spec"]["podSelector"]["matchLabels"],
                   worker_labels)  # fmt: skip
    redis_policy = one("NetworkPolicy", "sbx-redis")["spec"]
    assert selects(redis_policy["podSelector"]["matchLabels"], redis_labels)
    assert selects(redis_policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"],
                   worker_labels)  # fmt: skip
    assert selects(one("Service", "sbx-redis")["spec"]["selector"], redis_labels)
    # The broker address the Secret gives is the in-cluster Redis service.
    secret = one("Secret", "sbx")["stringData"]
    assert secret["redis-address"] == "sbx-redis:6379"
    assert "@sbx-redis:6379/" in secret["broker-url"]


def test_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk - {"secret.example.yaml"}
    assert all(d["metadata"].get("namespace", "sbx") == "sbx" for d in documents())
