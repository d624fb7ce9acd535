"""The run context a tool can ask for.

A tool that declares a parameter annotated `RunContext` receives the live context of the run
that called it; that parameter never appears in the tool's JSON Schema, so the model cannot
see or forge it. The context carries the run's identity and its variables, which the agent's
instructions template can also read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunContext:
    """What the runner knows about the run a tool is serving."""

    run_id: str
    agent: str
    variables: dict[str, Any] = field(default_factory=dict)
    step: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.variables.get(key, default)
