"""Traces: every run recorded as rows in DuckDB, redacted, linear in size, replayable.

`TraceStore` is the store (attach it with `Runner.run(..., store=...)`), `TraceRecorder` the
hook that turns events into rows, `RedactionRules` what counts as a secret. The rest of the
package is implementation and may move.
"""

from agentbench.trace.code_version import code_version
from agentbench.trace.errors import (
    RunNotFoundError,
    StorageFaultError,
    StoreBusyError,
    StoreFormatError,
    StoreFullError,
    StoreNotFoundError,
    StoreReadOnlyError,
    TraceStoreError,
)
from agentbench.trace.recorder import RunLabels, TraceRecorder
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules
from agentbench.trace.request_diff import request_hash
from agentbench.trace.schema import (
    ContextDiffRecord,
    EventRecord,
    LlmCallRecord,
    RunRecord,
    RunRows,
    RunStatus,
    RunTrace,
    ToolCallRecord,
)
from agentbench.trace.store import DEFAULT_PATH, ENV_VAR, TraceStore, default_path

__all__ = [
    "DEFAULT_PATH",
    "ENV_VAR",
    "ContextDiffRecord",
    "EventRecord",
    "LlmCallRecord",
    "RedactionRules",
    "Redactor",
    "RunLabels",
    "RunNotFoundError",
    "RunRecord",
    "RunRows",
    "RunStatus",
    "RunTrace",
    "StorageFaultError",
    "StoreBusyError",
    "StoreFormatError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreReadOnlyError",
    "ToolCallRecord",
    "TraceRecorder",
    "TraceStore",
    "TraceStoreError",
    "code_version",
    "default_path",
    "request_hash",
]
