"""Model providers: the protocol, a scripted model, OpenAI-compatible, Anthropic and the embedded model."""

from .base import Model, ModelRequest, ModelUsage
from .scripted import ScriptedModel

__all__ = ("Model", "ModelRequest", "ModelUsage", "ScriptedModel")
