"""agentbench: a lightweight agent runtime with record, replay and regression testing.

These names are the public API; everything else may move between releases.
"""

from typing import TYPE_CHECKING

from agentbench._version import __version__
from agentbench.errors import (
    AgentbenchError,
    InstructionsError,
    ModelError,
    ModelTimeoutError,
    OutputValidationError,
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

if TYPE_CHECKING:
    from agentbench.runtime.openai_model import OpenAIModel
    from agentbench.trace.store import TraceStore


def __getattr__(name: str) -> object:
    # The openai SDK takes about a second to import, DuckDB (behind TraceStore) about a fifth
    # of one: load each only when it is used, so `import agentbench` stays fast.
    if name == "OpenAIModel":
        from agentbench.runtime.openai_model import OpenAIModel

        return OpenAIModel
    if name == "TraceStore":
        from agentbench.trace.store import TraceStore

        return TraceStore
    raise AttributeError(f"module 'agentbench' has no attribute {name!r}")


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
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "TraceStore",
    "Usage",
    "UsageError",
    "__version__",
    "tool",
]
