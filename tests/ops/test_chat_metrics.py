"""The chat adapters' shared reports (``extensions.chat.ChatMetrics``) land in the counters of ``bots.metrics``."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bots.ops import Ops
from extensions.chat import ChatMetrics, Ignored
from extensions.terminal import cli_session

from .support import make_agent, sample


def test_every_reason_is_counted_under_its_own_label() -> None:
    agent = make_agent()
    Ops().attach(agent)
    metrics = ChatMetrics("cli")
    received = sample("bots_messages_received_total", {"platform": "cli"})
    before = {r: sample("bots_messages_ignored_total", {"platform": "cli", "reason": r.value}) for r in Ignored}
    limited = sample("bots_platform_rate_limited_total", {"platform": "cli"})

    metrics.received(cli_session, "unbound")  # not bound to an agent yet: dropped
    metrics.bind(agent)
    for reason in Ignored:
        metrics.received(cli_session, "room")
        metrics.ignored(cli_session, "room", reason)
    metrics.rate_limited()

    assert sample("bots_messages_received_total", {"platform": "cli"}) == received + len(Ignored)
    for reason in Ignored:
        assert sample("bots_messages_ignored_total", {"platform": "cli", "reason": reason.value}) == before[reason] + 1
    assert sample("bots_platform_rate_limited_total", {"platform": "cli"}) == limited + 1


def test_the_reasons_are_the_ones_metrics_help_names() -> None:
    import bots.metrics  # noqa: F401  (registers the counters)

    [family] = [
        f for f in text_string_to_metric_families(generate_latest().decode()) if f.name == "bots_messages_ignored"
    ]
    assert all(reason.value in family.documentation for reason in Ignored)
