"""``deploy/k8s`` as ``kubectl apply -k`` sends it: valid against the Kubernetes schemas (offline, those the
kubernetes-validate package ships), every image set in one place, no Secret that would overwrite the operator's,
the restricted pod security level for every pod, Redis that refuses writes before it is killed and asks for a
password, budgets for drains, anti-affinity, network policies, PostgreSQL, the backlog autoscaler and the
ServiceMonitors of the optional components."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as k8s_schemas

from bots.docs import settings_variables
from bots.metrics import QUEUE_DEPTH
from core.fleet.backlog import Backlog

from .manifests import (
    COMPONENTS,
    DEPLOY,
    K8S,
    Manifest,
    assemble,
    by_kind,
    containers,
    kustomization,
    load_yaml,
    pod_specs,
)

KUBERNETES = ("1.29", k8s_schemas.latest_version())
"""The Kubernetes versions validated against: an old one still served by the clouds, and the newest schemas."""
CUSTOM = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}
"""Kinds of the optional components that no Kubernetes schema has (their operators' CRDs): checked field by field."""
BOTS_IMAGE = "daydreams-bots"
SECRET = "bots-secrets"


@pytest.fixture(scope="module")
def base() -> list[Manifest]:
    return assemble()


@pytest.fixture(scope="module")
def full() -> list[Manifest]:
    return assemble(components=COMPONENTS)


def workloads(manifests: list[Manifest]) -> list[Manifest]:
    return [m for m in manifests if any(True for _ in pod_specs(m))]


# -- the schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES)
def test_every_manifest_is_valid_against_the_kubernetes_schemas(full: list[Manifest], version: str) -> None:
    checked = 0
    for manifest in full:
        if (manifest["apiVersion"], manifest["kind"]) in CUSTOM:
            continue
        try:  # strict: a field the schema does not know (a typo, a wrong level) is refused too
            k8s_schemas.validate(manifest, version, strict=True)
        except k8s_schemas.ValidationError as error:
            where = "/".join(str(p) for p in error.path)
            pytest.fail(f"{manifest['kind']} {manifest['metadata']['name']}: {where}: {error.message}")
        checked += 1
    assert checked >= 20


def test_the_schema_check_refuses_a_misplaced_field(base: list[Manifest]) -> None:
    gateway = copy.deepcopy(by_kind(base, "Deployment")["bots-gateway"])
    gateway["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True  # the capital S
    with pytest.raises(k8s_schemas.ValidationError):
        k8s_schemas.validate(gateway, KUBERNETES[-1], strict=True)


def test_the_components_kinds_have_their_fields(full: list[Manifest]) -> None:
    custom = [m for m in full if (m["apiVersion"], m["kind"]) in CUSTOM]
    assert {(m["apiVersion"], m["kind"]) for m in custom} == CUSTOM
    services = by_kind(full, "Service")
    for monitor in by_kind(full, "ServiceMonitor").values():
        selected = [
            s
            for s in services.values()
            if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
        ]
        assert selected, f"ServiceMonitor {monitor['metadata']['name']} selects no Service"
        for endpoint in monitor["spec"]["endpoints"]:
            assert all(endpoint["port"] in {p["name"] for p in s["spec"]["ports"]} for s in selected)
    rule = by_kind(full, "PrometheusRule")["bots"]
    assert rule["spec"]["groups"], "the PrometheusRule holds no rule"


def test_kubectl_assembles_the_same_objects(tmp_path: Any) -> None:
    """The assembly of ``tests/deploy/manifests.py`` is kustomize's (where kubectl is installed)."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the schemas are checked on the tests' own assembly")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    import os

    rel = os.path.relpath(K8S, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [rel], "components": [f"{rel}/{c}" for c in COMPONENTS]})
    )
    done = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    theirs = {(m["kind"], m["metadata"]["name"]): m for m in yaml.safe_load_all(done.stdout)}
    ours = {(m["kind"], m["metadata"]["name"]): m for m in assemble(components=COMPONENTS)}
    assert theirs.keys() == ours.keys()
    for key, manifest in ours.items():
        assert [c["image"] for c in containers(theirs[key])] == [c["image"] for c in containers(manifest)], key


# -- images in one place -------------------------------------------------------------------------------


def test_every_image_is_set_in_the_kustomization_only() -> None:
    rules = {rule["name"]: rule for rule in kustomization()["images"]}
    for path in sorted(K8S.rglob("*.yaml")):
        for manifest in load_yaml(path):
            for container in containers(manifest):
                image = container["image"]
                assert ":" not in image and "@" not in image, (
                    f"{path.name}: {container['name']} names {image}: a tag here would not be the one of "
                    "kustomization.yaml's images:, the only place an image is set"
                )
                assert image in rules, f"{path.name}: {image} has no entry in kustomization.yaml's images:"
                assert container.get("imagePullPolicy") == "IfNotPresent", f"{path.name}: {container['name']}"
    for name, rule in rules.items():
        assert rule.get("newTag", "") not in ("", "latest") or "digest" in rule, f"{name}: no tag, or :latest"


def test_the_bots_image_follows_the_one_setting(base: list[Manifest]) -> None:
    images = copy.deepcopy(kustomization()["images"])
    for rule in images:
        if rule["name"] == BOTS_IMAGE:
            rule.update(newName="registry.test/team/bots", newTag="9.9.9")
    moved = assemble(images=images)
    bots = [c["image"] for m in moved for c in containers(m) if m["metadata"]["name"].startswith("bots-")]
    assert len(bots) == 2 and set(bots) == {"registry.test/team/bots:9.9.9"}
    for manifest in base:
        for container in containers(manifest):
            assert not container["image"].endswith(":latest"), container["image"]
            assert re.search(r"(:[\w.-]+|@sha256:[0-9a-f]{64})$", container["image"]), container["image"]


# -- the Secret ----------------------------------------------------------------------------------------


def secret_keys() -> set[str]:
    lines = (K8S / "secrets.env.example").read_text(encoding="utf-8").splitlines()
    return {line.split("=", 1)[0] for line in lines if line.strip() and not line.startswith("#")}


def test_apply_never_writes_the_secret(full: list[Manifest]) -> None:
    """The operator creates bots-secrets once (kubectl create secret ... --from-env-file): a Secret in the
    kustomization, or a generator of one, would replace its values at every apply, empty ones included."""
    assert not by_kind(full, "Secret"), "kubectl apply -k would overwrite the operator's Secret"
    for path in [K8S, *(K8S / c for c in COMPONENTS)]:
        config = kustomization(path)
        assert "secretGenerator" not in config, f"{path}: a secretGenerator rewrites the Secret at every apply"
    text = (K8S / "kustomization.yaml").read_text(encoding="utf-8")
    assert f"kubectl create secret generic {SECRET} --from-env-file=" in text


def test_every_secret_reference_is_a_key_the_operator_is_told_to_set(full: list[Manifest]) -> None:
    keys = secret_keys()
    variables = settings_variables()
    assert {"REDIS_PASSWORD", "POSTGRES_PASSWORD"} <= keys
    for key in keys - {"POSTGRES_PASSWORD"}:
        assert key in variables, f"secrets.env.example: {key} is not a setting"
        assert "SecretStr" in repr(variables[key].annotation), f"secrets.env.example: {key} is not a secret"
    for manifest in full:
        for container in containers(manifest):
            for ref in container.get("envFrom", []):
                if "secretRef" in ref:
                    assert ref["secretRef"]["name"] == SECRET
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref is not None:
                    assert ref["name"] == SECRET and ref["key"] in keys, f"{container['name']}: {ref}"


# -- the restricted pod security level -----------------------------------------------------------------


def test_every_pod_meets_the_restricted_pod_security_level(full: list[Manifest]) -> None:
    pods = workloads(full)
    assert {m["metadata"]["name"] for m in pods} == {
        "bots-gateway", "bots-worker", "redis", "redis-sentinel", "postgres"
    }  # fmt: skip
    for manifest in pods:
        name = manifest["metadata"]["name"]
        (pod,) = pod_specs(manifest)
        context = pod.get("securityContext", {})
        assert context.get("runAsNonRoot") is True, name
        assert context.get("runAsUser", 1) != 0, name
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), name
        assert pod.get("automountServiceAccountToken") is False, f"{name} talks to no Kubernetes API"
        assert all("hostPath" not in v for v in pod.get("volumes", [])), name
        for container in containers(manifest):
            own = container.get("securityContext", {})
            seccomp = own.get("seccompProfile", context.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", f"{name}/{container['name']}: seccompProfile"
            assert own.get("allowPrivilegeEscalation") is False, f"{name}/{container['name']}"
            assert own.get("capabilities", {}).get("drop") == ["ALL"], f"{name}/{container['name']}"
            assert not own.get("capabilities", {}).get("add"), f"{name}/{container['name']}"
            assert not own.get("privileged"), f"{name}/{container['name']}"
            assert own.get("readOnlyRootFilesystem") is True, f"{name}/{container['name']}"
            assert own.get("runAsUser", 1) != 0, f"{name}/{container['name']}"


def test_what_a_read_only_pod_writes_is_a_volume(full: list[Manifest]) -> None:
    writes = {  # where each program writes, besides nothing else on its read-only root
        "bots-gateway": {"/data", "/tmp"},
        "bots-worker": {"/data", "/tmp"},
        "redis": {"/data", "/conf"},
        "redis-sentinel": {"/data"},
        "postgres": {"/var/lib/postgresql/data", "/var/run/postgresql", "/tmp"},
    }
    for manifest in workloads(full):
        first = next(containers(manifest))
        mounted = {m["mountPath"] for m in first.get("volumeMounts", [])}
        assert writes[manifest["metadata"]["name"]] <= mounted, manifest["metadata"]["name"]


# -- Redis ---------------------------------------------------------------------------------------------


def mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi|mb|gb)", quantity.strip()).groups()  # type: ignore[union-attr]
    return int(number) * {"Mi": 1, "Gi": 1024, "mb": 1, "gb": 1024}[unit]


def test_redis_refuses_writes_before_it_is_killed_and_asks_for_a_password(full: list[Manifest]) -> None:
    redis = by_kind(full, "StatefulSet")["redis"]
    server = next(containers(redis))
    script = " ".join(server["args"])
    assert "--maxmemory-policy noeviction" in script and "--appendonly yes" in script
    maxmemory = re.search(r"--maxmemory (\w+)", script)
    assert maxmemory, "no maxmemory: Redis would grow until the kernel kills it"
    limit = mebibytes(server["resources"]["limits"]["memory"])
    assert mebibytes(maxmemory[1]) <= 0.8 * limit, "maxmemory leaves no room below the limit (AOF rewrite, buffers)"
    assert "requirepass" in script and "masterauth" in script
    assert "$REDIS_PASSWORD" in script and "--requirepass" not in script, "the password stays off the command line"
    sentinel = " ".join(next(containers(by_kind(full, "StatefulSet")["redis-sentinel"]))["args"])
    assert 'sentinel auth-pass bots "$REDIS_PASSWORD"' in sentinel and 'requirepass "$REDIS_PASSWORD"' in sentinel
    for manifest in (redis, by_kind(full, "StatefulSet")["redis-sentinel"]):
        for container in containers(manifest):
            names = {e["name"] for e in container.get("env", [])}
            assert "REDIS_PASSWORD" in names, f"{container['name']} lacks the password"


def test_the_bots_reach_redis_and_postgres_with_their_passwords(full: list[Manifest]) -> None:
    variables = settings_variables()
    config = by_kind(full, "ConfigMap")["bots-config"]["data"]
    assert config["REDIS_SENTINELS"] and config["REDIS_URL"].startswith("redis://redis:")
    postgres = by_kind(full, "Service")["postgres"]
    assert by_kind(full, "StatefulSet")["postgres"]["spec"]["replicas"] == 1
    for name in ("bots-gateway", "bots-worker"):
        bots = next(containers(by_kind(full, "Deployment")[name]))
        env = {e["name"]: e for e in bots["env"]}
        assert set(env) <= set(variables) | {"POSTGRES_PASSWORD"}, f"{name}: a variable no setting reads"
        # REDIS_PASSWORD comes with the whole Secret (envFrom); the sentinels ask for the same one
        assert env["REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "REDIS_PASSWORD"
        names = list(env)
        url = env["DATABASE_URL"]["value"]
        assert names.index("POSTGRES_PASSWORD") < names.index("DATABASE_URL"), "$(VAR) needs VAR defined first"
        port = postgres["spec"]["ports"][0]["port"]
        assert url == f"postgresql://bots:$(POSTGRES_PASSWORD)@postgres:{port}/bots"


def affinity_is_anti_to_itself(manifest: Manifest) -> bool:
    (pod,) = pod_specs(manifest)
    labels = manifest["spec"]["template"]["metadata"]["labels"]
    terms = pod.get("affinity", {}).get("podAntiAffinity", {})
    for term in terms.get("preferredDuringSchedulingIgnoredDuringExecution", []):
        inner = term["podAffinityTerm"]
        if inner["topologyKey"] == "kubernetes.io/hostname" and inner["labelSelector"]["matchLabels"].items() <= (
            labels.items()
        ):
            return True
    return any(
        t["topologyKey"] == "kubernetes.io/hostname" and t["labelSelector"]["matchLabels"].items() <= labels.items()
        for t in terms.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    )


def test_redis_servers_and_sentinels_spread_over_nodes(full: list[Manifest]) -> None:
    sets = by_kind(full, "StatefulSet")
    for name in ("redis", "redis-sentinel"):
        assert affinity_is_anti_to_itself(sets[name]), f"{name} may put all its pods on one node"


# -- budgets and network policies ----------------------------------------------------------------------


def selects(selector: Manifest, manifest: Manifest) -> bool:
    labels = manifest["spec"]["template"]["metadata"]["labels"]
    return bool(selector.get("matchLabels")) and selector["matchLabels"].items() <= labels.items()


def test_a_disruption_budget_for_each_replicated_workload(full: list[Manifest]) -> None:
    budgets = by_kind(full, "PodDisruptionBudget")
    for manifest in workloads(full):
        name = manifest["metadata"]["name"]
        mine = [b for b in budgets.values() if selects(b["spec"]["selector"], manifest)]
        if manifest["spec"]["replicas"] == 1:
            continue  # a budget on one pod would block every drain
        assert len(mine) == 1, f"{name}: {len(mine)} PodDisruptionBudgets"
        spec = mine[0]["spec"]
        allowed = (
            spec["maxUnavailable"] if "maxUnavailable" in spec else manifest["spec"]["replicas"] - spec["minAvailable"]
        )
        assert allowed >= 1, f"{name}: its budget blocks every drain"
    sentinel = next(b for b in budgets.values() if b["metadata"]["name"] == "redis-sentinel")
    assert sentinel["spec"]["minAvailable"] == 2, "a failover needs a majority of the three sentinels"


def test_network_policies_cover_every_pod_and_keep_the_console_closed(full: list[Manifest]) -> None:
    policies = by_kind(full, "NetworkPolicy")
    for manifest in workloads(full):
        name = manifest["metadata"]["name"]
        mine = [p for p in policies.values() if selects(p["spec"]["podSelector"], manifest)]
        assert mine, f"{name}: no NetworkPolicy, so every pod of the cluster reaches it"
        declared = {port["containerPort"] for c in containers(manifest) for port in c.get("ports", [])}
        opened = {port["port"] for p in mine for rule in p["spec"]["ingress"] for port in rule["ports"]}
        assert opened <= declared, f"{name}: a policy opens a port no container has"
        if name == "bots-gateway":
            assert 8766 in declared and 8766 not in opened, "the console is for kubectl port-forward only"
    datastores = {"redis": 6379, "redis-sentinel": 26379, "postgres": 5432}
    for name, port in datastores.items():
        for rule in policies[name]["spec"]["ingress"]:
            if any(p["port"] == port for p in rule["ports"]):
                assert rule["from"] and all("podSelector" in f and "namespaceSelector" not in f for f in rule["from"])


# -- the autoscaler and the metrics --------------------------------------------------------------------


def test_keda_scales_the_workers_on_the_backlog(full: list[Manifest]) -> None:
    assert not by_kind(full, "HorizontalPodAutoscaler"), "KEDA makes the HPA; a second one would fight it"
    scaled = by_kind(full, "ScaledObject")["bots-worker"]
    assert scaled["spec"]["scaleTargetRef"]["name"] in by_kind(full, "Deployment")
    assert scaled["spec"]["minReplicaCount"] >= 1
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    query = trigger["metadata"]["query"]
    assert QUEUE_DEPTH.describe()[0].name in query
    queue = re.search(r'queue="(\w+)"', query)
    assert queue and queue[1] in Backlog(inbox=0, jobs=0, dead=0).depths(), "a queue the workers do not measure"
    assert float(trigger["metadata"]["threshold"]) > 0


def test_the_pods_carry_the_labels_the_metrics_service_selects(full: list[Manifest]) -> None:
    service = by_kind(full, "Service")["bots-metrics"]
    selected = [
        m["metadata"]["name"]
        for m in workloads(full)
        if service["spec"]["selector"].items() <= (m["spec"]["template"]["metadata"]["labels"].items())
    ]
    assert sorted(selected) == ["bots-gateway", "bots-worker"]


def test_the_docs_say_how_to_build_push_and_create_the_secret() -> None:
    text = (ROOT_DOCS / "deploy.md").read_text(encoding="utf-8")
    for needed in ("docker push", "kustomize edit set image", "--from-env-file=secrets.env", "components/keda"):
        assert needed in text, f"docs/how-to/deploy.md does not say {needed!r}"


ROOT_DOCS = DEPLOY.parent / "docs" / "how-to"


def _kustomized(tmp_path: Any, components: tuple[str, ...]) -> dict[tuple[str, str], Manifest]:
    import os

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    overlay = tmp_path / f"overlay{len(components)}"
    overlay.mkdir()
    rel = os.path.relpath(K8S, overlay)
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": [rel], "components": [f"{rel}/{c}" for c in components]})
    )
    done = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {(m["kind"], m["metadata"]["name"]): m for m in yaml.safe_load_all(done.stdout)}


def test_the_keda_add_on_leaves_the_worker_count_to_keda(tmp_path: Any) -> None:
    """With components/keda, ``kubectl apply -k`` sends the workers' Deployment without ``replicas``, so an apply
    does not set them back to 2 (issue 47); without it, the fixed count stays."""
    keda = [c for c in COMPONENTS if c.endswith("keda")]
    assert keda, COMPONENTS
    worker = _kustomized(tmp_path, tuple(keda))[("Deployment", "bots-worker")]
    assert "replicas" not in worker["spec"]
    assert _kustomized(tmp_path, ())[("Deployment", "bots-worker")]["spec"]["replicas"] == 2
    assert _kustomized(tmp_path, COMPONENTS)[("Deployment", "bots-gateway")]["spec"]["replicas"] == 2
