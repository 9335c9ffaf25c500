"""The Kubernetes manifests of ``deploy/k8s`` as ``kubectl apply -k`` would send them, assembled without kubectl:
the part of kustomize this kustomization uses (resources, components, ``images:``, ``labels:``), so the tests run on
a machine without it. Where kubectl is installed, a test checks that kubectl assembles the same objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPONENTS = ("components/keda", "components/monitoring")
"""The optional components, each needing its operator in the cluster (KEDA, the Prometheus Operator)."""

Manifest = dict[str, Any]


def load_yaml(path: Path) -> list[Manifest]:
    """The documents of ``path`` (empty ones left out)."""
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def kustomization(folder: Path = K8S) -> Manifest:
    """``folder``'s kustomization.yaml."""
    (doc,) = load_yaml(folder / "kustomization.yaml")
    return doc


def pod_specs(manifest: Manifest) -> Iterator[Manifest]:
    """The pod spec of a workload (Deployment, StatefulSet, ...) or a Pod; nothing for other kinds."""
    if manifest["kind"] == "Pod":
        yield manifest["spec"]
    elif "template" in manifest.get("spec", {}) and "spec" in manifest["spec"]["template"]:
        yield manifest["spec"]["template"]["spec"]


def containers(manifest: Manifest) -> Iterator[Manifest]:
    """Every container (init containers too) of ``manifest``'s pods."""
    for pod in pod_specs(manifest):
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


def _resources(folder: Path, seen: set[Path]) -> list[Manifest]:
    config = kustomization(folder)
    found: list[Manifest] = []
    for entry in config.get("resources", []):
        path = (folder / entry).resolve()
        if path.is_dir():
            found += assemble(path, components=(), _seen=seen)
        else:
            found += load_yaml(path)
    for component in config.get("components", []):
        found += _resources((folder / component).resolve(), seen)
    return found


def _image(image: str, rules: list[Manifest]) -> str:
    name, _, tag = image.partition(":")
    for rule in rules:
        if rule["name"] == name:
            if "digest" in rule:
                return f"{rule.get('newName', name)}@{rule['digest']}"
            return f"{rule.get('newName', name)}:{rule.get('newTag', tag or 'latest')}"
    return image


def assemble(
    folder: Path = K8S, *, components: tuple[str, ...] = (), images: list[Manifest] | None = None, _seen: Any = None
) -> list[Manifest]:
    """The objects of the kustomization in ``folder``, with ``components`` (paths relative to it) added, as kustomize
    would build them; ``images`` in place of the kustomization's own ``images:``."""
    seen: set[Path] = _seen if _seen is not None else set()
    assert folder not in seen, f"{folder} is included twice"
    seen.add(folder)
    config = kustomization(folder)
    found = _resources(folder, seen)
    for component in components:
        found += _resources((folder / component).resolve(), seen)
    rules = config.get("images", []) if images is None else images
    labels = {k: v for entry in config.get("labels", []) for k, v in entry["pairs"].items()}
    for manifest in found:
        manifest.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        for container in containers(manifest):
            container["image"] = _image(container["image"], rules)
    return found


def by_kind(manifests: list[Manifest], kind: str) -> dict[str, Manifest]:
    """The objects of ``kind`` by name."""
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}
