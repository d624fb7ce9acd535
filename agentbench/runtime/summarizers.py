"""How memory turns process content (tool exchanges, notes) into a short summary.

`RuleSummarizer` is the default: deterministic, free, and it keeps each call's arguments, result
kind and the head of its result — the conclusions and key data. `LLMSummarizer` asks a model to
write the summary; its calls go through the runner like any other model call, so they are
recorded in the trace and replayed from cassettes like the agent's own calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agentbench.runtime.models import ChatModel, ChatResponse

CallModel = Callable[[dict[str, Any]], Awaitable[ChatResponse]]

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You compress an agent's working notes. Rewrite the steps below as a short list of the "
    "facts established, the numbers and identifiers that matter, and the reasons any attempt "
    "failed. Do not add anything that is not in the steps. Reply with the list only."
)


class Summarizer(Protocol):
    async def summarize(self, lines: list[str], call_model: CallModel) -> str:
        """Summarize `lines` (one per step, produced by the rules); may call a model."""
        ...


class RuleSummarizer:
    """The rule-based summary: the step lines themselves, one bullet each."""

    async def summarize(self, lines: list[str], call_model: CallModel) -> str:
        return "\n".join(f"- {line}" for line in lines)


class LLMSummarizer:
    """Ask a model (the agent's own by default) to summarize; falls back to the rules."""

    def __init__(
        self,
        model: ChatModel | None = None,
        *,
        instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
        max_tokens: int = 400,
    ) -> None:
        self.model = model
        self.instructions = instructions
        self.max_tokens = max_tokens

    def request(self, lines: list[str], default_model: str) -> dict[str, Any]:
        return {
            "model": self.model.name if self.model is not None else default_model,
            "messages": [
                {"role": "system", "content": self.instructions},
                {"role": "user", "content": "\n".join(f"- {line}" for line in lines)},
            ],
            "max_tokens": self.max_tokens,
        }

    async def summarize(self, lines: list[str], call_model: CallModel) -> str:
        response = await call_model(self.request(lines, default_model=""))
        text = (response.text or "").strip()
        if not text:
            raise ValueError("the summarizer model returned no text")
        return text
