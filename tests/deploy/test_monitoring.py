"""The Grafana dashboard and the Prometheus alert rules of ``deploy/monitoring``: every metric their queries name is
one the code exports (prometheus-client's registry once every module defining metrics is imported: a counter's
``_total``, a histogram's ``_bucket``, ``_sum`` and ``_count``), or one of the Redis exporter's; the rules load and
pass their unit tests in promtool (Debian's prometheus package, installed by .ci/run); the PrometheusRule of the
monitoring component holds the same rules."""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from subprocess import PIPE, STDOUT
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from .manifests import DEPLOY, K8S, load_yaml

MONITORING = DEPLOY / "monitoring"
REDIS_EXPORTER = {
    "redis_up",
    "redis_memory_used_bytes",
    "redis_memory_max_bytes",
    "redis_connected_slaves",
    "redis_connected_clients",
    "redis_commands_processed_total",
}
"""The redis_exporter metrics used (the sidecar of deploy/k8s/redis.yaml): not this project's, so named here."""
PROMETHEUS = {"up"}
"""What Prometheus itself records for every target."""
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
    "summary": ("_sum", "_count", ""),
}


def exported() -> set[str]:
    """The names of every series the code's metrics can expose."""
    for path in sorted((DEPLOY.parent / "bots").rglob("*.py")):
        if "prometheus_client" in path.read_text(encoding="utf-8"):
            importlib.import_module(".".join(path.relative_to(DEPLOY.parent).with_suffix("").parts))
    names: set[str] = set()
    for family in REGISTRY.collect():
        for suffix in SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
        names |= {sample.name for sample in family.samples}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings (label values)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    names = set()
    for found in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, after = found.group(), text[found.end() :].lstrip()
        if word in KEYWORDS or after.startswith("("):
            continue
        names.add(word)
    return names


def test_metric_names_are_read_from_an_expression() -> None:
    expr = (
        'sum by (model) (rate(bots_model_failed_total{model="x"}[5m])) / on(model) '
        "histogram_quantile(0.95, sum by (le) (rate(bots_reply_seconds_bucket[10m]))) > 0.2 and up == 1"
    )
    assert metric_names(expr) == {"bots_model_failed_total", "bots_reply_seconds_bucket", "up"}


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads((MONITORING / "dashboard.json").read_text(encoding="utf-8"))
    found = []
    for panel in board["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                found.append((inner["title"], target["expr"]))
    return found


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((MONITORING / "alerts.yaml").read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_dashboard_names_only_metrics_that_exist() -> None:
    known = exported() | REDIS_EXPORTER | PROMETHEUS
    queries = dashboard_queries()
    assert len(queries) >= 12
    for title, expr in queries:
        unknown = metric_names(expr) - known
        assert not unknown, f"dashboard panel {title!r} reads metrics nothing exports: {sorted(unknown)}"
    read = set().union(*(metric_names(expr) for _, expr in queries))
    for needed in ("bots_queue_depth", "bots_reply_seconds_bucket", "bots_model_failed_total",
                   "bots_usage_cost_dollars_total", "redis_up"):  # fmt: skip
        assert needed in read, f"the dashboard does not show {needed}"


def test_the_alert_rules_name_only_metrics_that_exist() -> None:
    known = exported() | REDIS_EXPORTER | PROMETHEUS
    for rule in rules():
        unknown = metric_names(rule["expr"]) - known
        assert not unknown, f"alert {rule['alert']} reads metrics nothing exports: {sorted(unknown)}"
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_the_monitoring_component_holds_the_same_rules() -> None:
    (rule,) = load_yaml(K8S / "components" / "monitoring" / "prometheusrule.yaml")
    groups = yaml.safe_load((MONITORING / "alerts.yaml").read_text(encoding="utf-8"))["groups"]
    assert rule["spec"]["groups"] == groups, "copy deploy/monitoring/alerts.yaml's groups into prometheusrule.yaml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian's prometheus package: .ci/run installs it)")
    return found


def run(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_promtool_loads_the_rules() -> None:
    done = run(promtool(), "check", "rules", "alerts.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(rules())} rules found" in done.stdout


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    done = run(promtool(), "test", "rules", "alerts.test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", (MONITORING / "alerts.test.yaml").read_text(encoding="utf-8")))
    assert tested == {rule["alert"] for rule in rules()}, "an alert without a unit test"


def test_a_broken_rule_fails_promtool(tmp_path: Path) -> None:
    broken = tmp_path / "alerts.yaml"
    broken.write_text("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: sum(rate(bots_x[5m])\n")
    assert run(promtool(), "check", "rules", str(broken), cwd=tmp_path).returncode != 0


IMPLICIT_LABELS = {"le", "pod", "instance", "job"}
"""Labels a query may use that the code does not set: the histogram's buckets, and what Prometheus adds."""


def labels_used(expr: str) -> set[str]:
    """The label names an expression groups by or matches on."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", text):
        names |= {n.strip() for n in group.split(",") if n.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", text):
        names |= set(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    return names


async def test_the_queries_read_labels_that_a_run_exports() -> None:
    """One message through an agent with the bots' metrics attached, then /metrics as Prometheus reads it: the text
    passes ``promtool check metrics``, and every query of the dashboard and the rules whose metrics the run
    produced groups and matches on labels those samples carry."""
    import aiohttp
    from prometheus_client.parser import text_string_to_metric_families

    from bots.ops import Ops, serve
    from core import Price
    from extensions.terminal import cli_session
    from tests.ops.support import REPLY, CountingModel, make_agent

    ops = Ops()
    agent = make_agent(CountingModel([REPLY], usage=(100, 7)), prices={"scripted": Price(input=2.0, output=10.0)})
    ops.attach(agent)
    async with aiohttp.ClientSession() as http, agent, serve(ops, host="127.0.0.1", port=0) as port:
        await agent.send(cli_session, "deploy", {"type": "cli:message", "data": "hello"})
        async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
            assert response.status == 200
            text = await response.text()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    tool = shutil.which("promtool")
    if tool is not None:
        check = await asyncio.create_subprocess_exec(tool, "check", "metrics", stdin=PIPE, stdout=PIPE, stderr=STDOUT)
        out, _ = await asyncio.wait_for(check.communicate(text.encode()), timeout=60)
        assert check.returncode == 0, out.decode()
    queries = [expr for _, expr in dashboard_queries()] + [rule["expr"] for rule in rules()]
    checked = 0
    for expr in queries:
        names = metric_names(expr) - PROMETHEUS
        if not names or not names <= labels.keys():
            continue  # a metric this run did not produce (the backlog, Redis, failures)
        carried = set().union(*(labels[name] for name in names))
        missing = labels_used(expr) - IMPLICIT_LABELS - carried
        assert not missing, f"{expr}: no sample of {sorted(names)} carries {sorted(missing)}"
        checked += 1
    assert checked >= 5, f"only {checked} queries read metrics the run produced"


def _alert(name: str) -> dict[str, Any]:
    found = [rule for rule in rules() if rule.get("alert") == name]
    assert len(found) == 1, f"no alert rule {name}"
    tested = (MONITORING / "alerts.test.yaml").read_text(encoding="utf-8")
    assert f"alertname: {name}" in tested, f"{name} has no promtool unit test in alerts.test.yaml"
    return found[0]


def test_an_alert_fires_when_no_worker_is_alive() -> None:
    """Issue 47: every process exports bots_worker_up (a worker 1, others 0); none at 1, or nothing reporting at all,
    fires BotsNoWorker (its promtool tests: the only worker's series gone stale, every process gone)."""
    rule = _alert("BotsNoWorker")
    assert "bots_worker_up" in rule["expr"] and "vector(0)" in rule["expr"]
    assert rule["labels"]["severity"] == "critical"


def test_a_model_that_ignores_the_response_format_has_an_alert() -> None:
    """Issue 47: runs ended unread because the model wrote outside the response format are counted by model
    (bots_model_format_failed_total) and alerted on."""
    rule = _alert("BotsModelIgnoresFormat")
    assert "bots_model_format_failed_total" in rule["expr"] and "by (model)" in rule["expr"]
