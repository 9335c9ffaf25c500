"""``deploy/compose.yaml`` and ``deploy/compose.tracing.yaml``: valid against the compose specification's schema
(offline: the copy check-jsonschema ships), the bots image built and named, Redis with maxmemory under its memory
limit and a password, PostgreSQL as the fleet's long memory, and the tracing override pointing the bots at a
Jaeger that exists, with settings that exist."""

from __future__ import annotations

import importlib.resources
import json
import re
from typing import Any

import jsonschema
import pytest
import yaml

from bots.docs import settings_variables

from .manifests import DEPLOY

FILES = ("compose.yaml", "compose.tracing.yaml")
OTEL_SDK = {"OTEL_EXPORTER_OTLP_ENDPOINT"}
"""The OpenTelemetry SDK's variables the tracing override sets (read by the SDK, not by the settings)."""


def compose_schema() -> dict[str, Any]:
    vendored = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema: dict[str, Any] = json.loads(vendored.read_text(encoding="utf-8"))
    return schema


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("name", FILES)
def test_compose_files_are_valid_against_the_compose_schema(name: str) -> None:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(load(name))]
    assert not errors, "\n".join(errors)


def test_the_schema_check_refuses_a_misspelt_key() -> None:
    schema = compose_schema()
    broken = load("compose.yaml")
    broken["services"]["worker"]["restart_policy"] = "always"  # (a key of deploy:, not of a service)
    assert list(jsonschema.validators.validator_for(schema)(schema).iter_errors(broken))


def test_the_bots_image_is_built_and_named() -> None:
    services = load("compose.yaml")["services"]
    for name in ("gateway", "worker"):
        service = services[name]
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        image = service["image"]
        assert ":latest" not in image and re.search(r":[\w.${}:-]+$", image), image
        assert "BOTS_IMAGE" in image, "the operator names their registry's image in .env"


def test_redis_has_maxmemory_under_its_limit_noeviction_and_a_password() -> None:
    services = load("compose.yaml")["services"]
    for name in ("redis", "redis-replica"):
        redis = services[name]
        script = " ".join(redis["command"])
        assert "--maxmemory-policy noeviction" in script
        maxmemory = re.search(r"--maxmemory (\d+)mb", script)
        limit = re.fullmatch(r"(\d+)m", redis["mem_limit"])
        assert maxmemory and limit and int(maxmemory[1]) <= 0.8 * int(limit[1]), name
        assert "requirepass" in script and "masterauth" in script and "--requirepass" not in script
        assert redis["environment"]["REDIS_PASSWORD"].startswith("${REDIS_PASSWORD:?"), "an empty password starts"
        assert redis["user"] != "0" and redis["read_only"] is True
    sentinel = " ".join(services["sentinel-1"]["command"])
    assert 'sentinel auth-pass bots "$$REDIS_PASSWORD"' in sentinel and 'requirepass "$$REDIS_PASSWORD"' in sentinel
    bots = services["worker"]["environment"]
    assert bots["REDIS_SENTINEL_PASSWORD"].startswith("${REDIS_PASSWORD:?")
    # REDIS_PASSWORD itself reaches the bots through env_file (.env), as every other secret does
    assert {e["path"] for e in services["worker"]["env_file"]} == {"../.env"}


def test_postgres_is_the_fleets_long_memory() -> None:
    services = load("compose.yaml")["services"]
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert any(v.endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    user, database = postgres["environment"]["POSTGRES_USER"], postgres["environment"]["POSTGRES_DB"]
    for name in ("gateway", "worker"):
        url = services[name]["environment"]["DATABASE_URL"]
        assert re.fullmatch(rf"postgresql://{user}:\$\{{POSTGRES_PASSWORD:\?[^}}]+\}}@postgres:5432/{database}", url)
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_the_tracing_override_points_the_bots_at_jaeger() -> None:
    base, tracing = load("compose.yaml")["services"], load("compose.tracing.yaml")["services"]
    variables = settings_variables()
    assert set(tracing) - set(base) == {"jaeger"}
    for name in ("gateway", "worker"):
        env = tracing[name]["environment"]
        assert set(env) - OTEL_SDK <= set(variables), f"{name}: a variable no setting reads"
        assert env["TRACING_ENABLED"] == "true"
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"  # OTLP over HTTP, what bots.tracing sends
        assert "{trace_id}" in env["TRACING_UI_URL"]
    jaeger = tracing["jaeger"]
    assert re.fullmatch(r"jaegertracing/all-in-one:\d+\.\d+\.\d+", jaeger["image"])
    assert jaeger["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert all(str(p).startswith("127.0.0.1:") for p in jaeger["ports"]), "the trace viewer stays on the loopback"
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    extras = re.search(r"^ARG EXTRAS=(\S+)$", dockerfile, re.M)
    assert extras and "tracing" in extras[1].split(","), "the image cannot export traces"


def test_every_documented_compose_command_passes_the_env_file() -> None:
    """compose.yaml reads REDIS_PASSWORD and POSTGRES_PASSWORD from the file --env-file names (and refuses to start
    without them), so every command the README and the deploy guide give carries it."""
    root = DEPLOY.parent
    found = 0
    for path in (root / "README.md", root / "docs" / "how-to" / "deploy.md", root / "docs" / "how-to" / "tracing.md",
                 root / "docs" / "how-to" / "upgrading.md", DEPLOY / "compose.yaml", DEPLOY / "compose.tracing.yaml"):  # fmt: skip
        for command in re.findall(r"docker compose [^`#\n]*", path.read_text(encoding="utf-8")):
            if "deploy/compose.yaml" in command:
                assert "--env-file .env" in command, f"{path.name}: {command}"
                found += 1
    assert found >= 6
    text = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    for variable in ("REDIS_PASSWORD", "POSTGRES_PASSWORD"):
        assert f"${{{variable}:?" in text, f"an empty {variable} would start a Redis or PostgreSQL without one"
