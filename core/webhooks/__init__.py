"""Webhooks in: events posted by other systems start a turn in a conversation the operator chose
(``POST /hooks/<name>``, signed; see ``core.webhooks.plugin``)."""

from .plugin import WEBHOOK_INPUT, Verdict, Webhooks, WebhookSource
from .signing import SCHEMES, Scheme, github_signature, sign
from .store import MemoryWebhookStore, WebhookStore

__all__ = (  # noqa: RUF022 (sorted as tests/test_public_api.py sorts: plain string order)
    "MemoryWebhookStore",
    "SCHEMES",
    "Scheme",
    "Verdict",
    "WEBHOOK_INPUT",
    "WebhookSource",
    "WebhookStore",
    "Webhooks",
    "github_signature",
    "sign",
)
