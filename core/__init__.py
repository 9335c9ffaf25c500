"""The agent framework: definitions, the agent, the step loop, prompts, parser, memory and models.

Nothing here imports a chat platform; ``extensions/`` brings those.
"""

from .agent import Agent, create_agent
from .agent_options import AgentOptions
from .bot import Bot
from .chat_settings import ChatPolicy, ChatSetting, ChatSettings
from .definitions import (
    Action,
    ActionContext,
    Context,
    ContextState,
    ContextUse,
    Extension,
    Input,
    InputContext,
    Output,
    OutputContext,
    OutputResult,
    PlatformChat,
    Service,
    action,
    context,
    extension,
    input,
    output,
    service,
)
from .dispatch import Dispatcher, InProcessDispatcher
from .entries import (
    ActionCall,
    ActionResult,
    ErrorLog,
    EventRef,
    InputRef,
    Log,
    OutputRef,
    OutputRefResponse,
    Thought,
    WorkingMemory,
)
from .errors import (
    ActionError,
    BackpressureError,
    BotError,
    ConfigError,
    DefinitionError,
    DispatchError,
    MemoryStoreError,
    ModelAuthError,
    ModelError,
    NotAllowedError,
    PlatformError,
    RunError,
    TemplateError,
    ValidationError,
)
from .escape import escape_text
from .events import RunEvent, RunEventType
from .health import Degraded
from .host import Host, Runner, Setup
from .limits import InMemoryLimitStore, LimitConfig, Limiter
from .loop_guard import LoopGuard
from .memory import InMemoryStore, MemoryStore, SQLiteStore
from .models import Model, ModelRequest, ModelUsage, ScriptedModel
from .parser import StreamParser, unescape_text
from .plugin import Brings, CallGate, ModelCall, OutputGate, Plugin, RunHooks, RunView
from .prompt import Prompt, build_prompt
from .schema import external_schema
from .state_access import data_input, read_state, write_state
from .usage import InMemoryUsage, Price, SQLiteUsage, UsageStore, UsageTotals

__all__ = (
    "Action",
    "ActionCall",
    "ActionContext",
    "ActionError",
    "ActionResult",
    "Agent",
    "AgentOptions",
    "BackpressureError",
    "Bot",
    "BotError",
    "Brings",
    "CallGate",
    "ChatPolicy",
    "ChatSetting",
    "ChatSettings",
    "ConfigError",
    "Context",
    "ContextState",
    "ContextUse",
    "DefinitionError",
    "Degraded",
    "DispatchError",
    "Dispatcher",
    "ErrorLog",
    "EventRef",
    "Extension",
    "Host",
    "InMemoryLimitStore",
    "InMemoryStore",
    "InMemoryUsage",
    "InProcessDispatcher",
    "Input",
    "InputContext",
    "InputRef",
    "LimitConfig",
    "Limiter",
    "Log",
    "LoopGuard",
    "MemoryStore",
    "MemoryStoreError",
    "Model",
    "ModelAuthError",
    "ModelCall",
    "ModelError",
    "ModelRequest",
    "ModelUsage",
    "NotAllowedError",
    "Output",
    "OutputContext",
    "OutputGate",
    "OutputRef",
    "OutputRefResponse",
    "OutputResult",
    "PlatformChat",
    "PlatformError",
    "Plugin",
    "Price",
    "Prompt",
    "RunError",
    "RunEvent",
    "RunEventType",
    "RunHooks",
    "RunView",
    "Runner",
    "SQLiteStore",
    "SQLiteUsage",
    "ScriptedModel",
    "Service",
    "Setup",
    "StreamParser",
    "TemplateError",
    "Thought",
    "UsageStore",
    "UsageTotals",
    "ValidationError",
    "WorkingMemory",
    "action",
    "build_prompt",
    "context",
    "create_agent",
    "data_input",
    "escape_text",
    "extension",
    "external_schema",
    "input",
    "output",
    "read_state",
    "service",
    "unescape_text",
    "write_state",
)
