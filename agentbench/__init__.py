"""agentbench: an evaluation and replay harness for agents, with a small agent runtime beside it.

These names are the public API; everything else may move between releases.
"""

from agentbench._version import __version__

# Not `typing.TYPE_CHECKING`: importing typing is most of what `import agentbench` costs, and
# the installed command catches a Ctrl-C only once this module has run. Type checkers read any
# name TYPE_CHECKING as true.
TYPE_CHECKING = False

# Each public name and the module it lives in, imported on first use (PEP 562): `import
# agentbench` costs nothing until a name is used (the openai SDK alone takes about a second,
# DuckDB a fifth of one), and the installed command can catch a Ctrl-C from its first line.
_HOMES = {
    "TargetContext": "agentbench.boundary.target",
    "current_target": "agentbench.boundary.target",
    "AgentbenchError": "agentbench.errors",
    "InstructionsError": "agentbench.errors",
    "ModelError": "agentbench.errors",
    "ModelTimeoutError": "agentbench.errors",
    "OutputValidationError": "agentbench.errors",
    "RecordingError": "agentbench.errors",
    "ScriptExhaustedError": "agentbench.errors",
    "ToolDefinitionError": "agentbench.errors",
    "UsageError": "agentbench.errors",
    "Agent": "agentbench.runtime.agent",
    "Limits": "agentbench.runtime.agent",
    "ModelSettings": "agentbench.runtime.agent",
    "Context": "agentbench.runtime.context",
    "RunContext": "agentbench.runtime.context",
    "Scope": "agentbench.runtime.context",
    "Event": "agentbench.runtime.events",
    "StopReason": "agentbench.runtime.events",
    "MemoryPolicy": "agentbench.runtime.memory",
    "ChatModel": "agentbench.runtime.models",
    "ChatResponse": "agentbench.runtime.models",
    "FunctionModel": "agentbench.runtime.models",
    "ScriptedModel": "agentbench.runtime.models",
    "ToolCall": "agentbench.runtime.models",
    "Usage": "agentbench.runtime.models",
    "OpenAIModel": "agentbench.runtime.openai_model",
    "AgentInfo": "agentbench.runtime.orchestration",
    "AgentRegistry": "agentbench.runtime.orchestration",
    "Router": "agentbench.runtime.orchestration",
    "RetryPolicy": "agentbench.runtime.retry",
    "RunResult": "agentbench.runtime.run_state",
    "Runner": "agentbench.runtime.runner",
    "LLMSummarizer": "agentbench.runtime.summarizers",
    "RuleSummarizer": "agentbench.runtime.summarizers",
    "BusinessFailure": "agentbench.runtime.tools",
    "Effect": "agentbench.runtime.tools",
    "ResultKind": "agentbench.runtime.tools",
    "Tool": "agentbench.runtime.tools",
    "ToolRegistry": "agentbench.runtime.tools",
    "ToolResult": "agentbench.runtime.tools",
    "tool": "agentbench.runtime.tools",
    "TraceStore": "agentbench.trace.store",
}

if TYPE_CHECKING:
    from agentbench.boundary.target import TargetContext, current_target
    from agentbench.errors import (
        AgentbenchError,
        InstructionsError,
        ModelError,
        ModelTimeoutError,
        OutputValidationError,
        RecordingError,
        ScriptExhaustedError,
        ToolDefinitionError,
        UsageError,
    )
    from agentbench.runtime.agent import Agent, Limits, ModelSettings
    from agentbench.runtime.context import Context, RunContext, Scope
    from agentbench.runtime.events import Event, StopReason
    from agentbench.runtime.memory import MemoryPolicy
    from agentbench.runtime.models import (
        ChatModel,
        ChatResponse,
        FunctionModel,
        ScriptedModel,
        ToolCall,
        Usage,
    )
    from agentbench.runtime.openai_model import OpenAIModel
    from agentbench.runtime.orchestration import AgentInfo, AgentRegistry, Router
    from agentbench.runtime.retry import RetryPolicy
    from agentbench.runtime.run_state import RunResult
    from agentbench.runtime.runner import Runner
    from agentbench.runtime.summarizers import LLMSummarizer, RuleSummarizer
    from agentbench.runtime.tools import (
        BusinessFailure,
        Effect,
        ResultKind,
        Tool,
        ToolRegistry,
        ToolResult,
        tool,
    )
    from agentbench.trace.store import TraceStore


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentbench' has no attribute {name!r}")
    import importlib

    # Not kept here: a module dropped from sys.modules and imported again (pytest's pytester
    # does that between runs) must give its new classes, or `isinstance` fails between them.
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "Agent",
    "AgentInfo",
    "AgentRegistry",
    "AgentbenchError",
    "BusinessFailure",
    "ChatModel",
    "ChatResponse",
    "Context",
    "Effect",
    "Event",
    "FunctionModel",
    "InstructionsError",
    "LLMSummarizer",
    "Limits",
    "MemoryPolicy",
    "ModelError",
    "ModelSettings",
    "ModelTimeoutError",
    "OpenAIModel",
    "OutputValidationError",
    "RecordingError",
    "ResultKind",
    "RetryPolicy",
    "Router",
    "RuleSummarizer",
    "RunContext",
    "RunResult",
    "Runner",
    "Scope",
    "ScriptExhaustedError",
    "ScriptedModel",
    "StopReason",
    "TargetContext",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "TraceStore",
    "Usage",
    "UsageError",
    "__version__",
    "current_target",
    "tool",
]
