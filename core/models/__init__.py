"""Model providers: the protocol, a scripted model, OpenAI-compatible, Anthropic and the embedded model, and a chain
of them that fails over (``FallbackModel``).

The SDKs (``openai``, ``anthropic``, ``xllamacpp``) are imported only when a provider is built.
"""

from .anthropic_api import AnthropicModel
from .base import (
    CallsTools,
    HoldsWeights,
    ImagePart,
    Model,
    ModelRequest,
    ModelRoute,
    ModelUsage,
    PrefersCompact,
    Preloads,
    SelfChecking,
    ServedOverHttp,
    interleave,
    report_reasoning,
    report_usage,
    without_images,
)
from .breaker import BreakerPolicy, BreakerState, CircuitBreaker
from .fallback import FallbackModel
from .grammar import GrammarLimits, build_grammar, grammar_for
from .local import LocalModel, default_model_path
from .openai_compat import OpenAICompatModel
from .retry import RetryPolicy
from .scripted import ScriptedModel

__all__ = (
    "AnthropicModel",
    "BreakerPolicy",
    "BreakerState",
    "CallsTools",
    "CircuitBreaker",
    "FallbackModel",
    "GrammarLimits",
    "HoldsWeights",
    "ImagePart",
    "LocalModel",
    "Model",
    "ModelRequest",
    "ModelRoute",
    "ModelUsage",
    "OpenAICompatModel",
    "PrefersCompact",
    "Preloads",
    "RetryPolicy",
    "ScriptedModel",
    "SelfChecking",
    "ServedOverHttp",
    "build_grammar",
    "default_model_path",
    "grammar_for",
    "interleave",
    "report_reasoning",
    "report_usage",
    "without_images",
)
