"""Traces: every run recorded as rows in DuckDB, redacted, linear in size, replayable.

`TraceStore` is the store (attach it with `Runner.run(..., store=...)`), `TraceRecorder` the
hook that turns events into rows, `RedactionRules` what counts as a secret. The rest of the
package is implementation and may move.
"""

# Imported now, not on first use: the function shares its module's name, and the module, once
# imported, would be what `agentbench.trace.code_version` finds. It costs a few milliseconds.
from agentbench.trace.code_version import code_version

# Each public name and the module it lives in, imported on first use (PEP 562): a command
# that reaches one small module of the package (`trace.storage.faults`, say) does not pay
# for the recorder, the schema and DuckDB's store, about a fifth of a second of imports.
_HOMES = {
    "RunNotFoundError": "agentbench.trace.errors",
    "StorageFaultError": "agentbench.trace.errors",
    "StoreBusyError": "agentbench.trace.errors",
    "StoreFormatError": "agentbench.trace.errors",
    "StoreFullError": "agentbench.trace.errors",
    "StoreNotFoundError": "agentbench.trace.errors",
    "StoreReadOnlyError": "agentbench.trace.errors",
    "TraceStoreError": "agentbench.trace.errors",
    "RunLabels": "agentbench.trace.recorder",
    "TraceRecorder": "agentbench.trace.recorder",
    "Redactor": "agentbench.trace.redaction.redactor",
    "RedactionRules": "agentbench.trace.redaction.rules",
    "request_hash": "agentbench.trace.request_diff",
    "ContextDiffRecord": "agentbench.trace.schema",
    "EventRecord": "agentbench.trace.schema",
    "LlmCallRecord": "agentbench.trace.schema",
    "RunRecord": "agentbench.trace.schema",
    "RunRows": "agentbench.trace.schema",
    "RunStatus": "agentbench.trace.schema",
    "RunTrace": "agentbench.trace.schema",
    "ToolCallRecord": "agentbench.trace.schema",
    "DEFAULT_PATH": "agentbench.trace.store",
    "ENV_VAR": "agentbench.trace.store",
    "TraceStore": "agentbench.trace.store",
    "default_path": "agentbench.trace.store",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'agentbench.trace' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
