"""Instructions as a jinja2 template, re-rendered at every iteration.

Each iteration the template sees the run's context variables (by name — `billing.order_id`
works as written — and all together as `context`), the agent's name, and `state`: one line per
tool result so far. With `Agent(state_summary=True)`, a template that does not mention `state`
gets a "State so far" section appended once there is something to report, so the model has the
facts it has gathered in front of it even when memory compresses the conversation. A handoff
note and pinned facts, when there are any, are appended too. An undefined variable fails with
the agent's and variable's names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agentbench.errors import InstructionsError
from agentbench.runtime.context import template_namespace

_ENV = ImmutableSandboxedEnvironment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
)
# What jinja2 reads as its own in a template (the environment's defaults), and `\r`, whose
# line endings it rewrites.
_SYNTAX = re.compile(r"\{[{%#]|\r")
_UNDEFINED_NAME = re.compile(r"'([^']+)' is undefined|has no attribute '([^']+)'")
STATE_HEADING = "## State so far"
PINNED_HEADING = "## Pinned facts"
HANDOFF_HEADING = "## Handoff"


class InstructionsTemplate:
    """A compiled instructions template for one agent."""

    def __init__(self, agent: str, source: str) -> None:
        self.agent = agent
        self.source = source
        try:
            parsed = _ENV.parse(source)
            self._template = _ENV.from_string(source)
        except jinja2.TemplateSyntaxError as exc:
            raise InstructionsError(agent, f"line {exc.lineno}: {exc.message}") from None
        self.variables = frozenset(meta.find_undeclared_variables(parsed))
        self.mentions_state = "state" in self.variables
        # Plain text (most instructions) renders as itself: no namespace to build and no
        # template to run at every iteration. jinja2 only changes text with its own syntax
        # in it, and line endings (`\r\n` becomes `\n`).
        self._plain = None if _SYNTAX.search(source) else source

    def render(
        self,
        variables: Mapping[str, Any],
        *,
        state: Sequence[str] = (),
        state_summary: bool = False,
        output_schema: str | None = None,
        pinned: Sequence[str] = (),
        handoff: str | None = None,
    ) -> str:
        text = self._plain if self._plain is not None else self._rendered(variables, state)
        if handoff:
            text = f"{text.rstrip()}\n\n{HANDOFF_HEADING}\n{handoff}"
        if pinned:
            text = f"{text.rstrip()}\n\n{PINNED_HEADING}\n" + "\n".join(f"- {p}" for p in pinned)
        if state and state_summary and not self.mentions_state:
            text = f"{text.rstrip()}\n\n{STATE_HEADING}\n" + "\n".join(f"- {s}" for s in state)
        if output_schema is not None:
            text = (
                f"{text.rstrip()}\n\nWhen you give your final answer, reply with only a JSON "
                f"object that matches this JSON Schema:\n{output_schema}"
            )
        return text

    def _rendered(self, variables: Mapping[str, Any], state: Sequence[str]) -> str:
        namespace = {
            **template_namespace(variables),
            "context": dict(variables),
            "agent": self.agent,
            "state": state,
        }
        try:
            return self._template.render(namespace)
        except jinja2.UndefinedError as exc:
            match = _UNDEFINED_NAME.search(str(exc))
            name = next((g for g in match.groups() if g), None) if match else None
            raise InstructionsError(
                self.agent,
                f"variable {name!r} is not defined; pass it in context= "
                f"(defined: {sorted(variables) or 'none'})",
                variable=name,
            ) from None
        except jinja2.TemplateError as exc:
            raise InstructionsError(self.agent, str(exc)) from None
