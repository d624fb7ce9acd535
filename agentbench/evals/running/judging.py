"""The LLM judge's own model calls: recorded beside the case's cassette, replayed on re-scoring.

A judge is a model too, so its verdicts would drift between runs; recording its calls in
`<case>.judge.yaml` makes re-scoring a stored or replayed case deterministic. Replaying
without a recording is a clear error in the judge's score, not a silent live call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentbench.errors import AgentbenchError
from agentbench.replay.cassette import Cassette, RecordMode
from agentbench.replay.models import RecordingModel, ReplayModel
from agentbench.runtime.models import ChatModel, ChatResponse, TextDeltaHandler


class _Unrecorded:
    """Stands in for a judge whose calls were never recorded: says so when asked."""

    def __init__(self, path: Path) -> None:
        self.name = "unrecorded-judge"
        self.path = path

    async def complete(
        self, request: dict[str, Any], *, on_text_delta: TextDeltaHandler | None = None
    ) -> ChatResponse:
        raise AgentbenchError(
            f"no recorded judge calls at {self.path}; record them with "
            "`agentbench run … --live --record-mode once`"
        )


@dataclass
class JudgeRecorder:
    model: ChatModel
    path: Path

    @classmethod
    def for_case(
        cls, suite: Any, case: Any, options: Any, path: Path, expectations: list[Any]
    ) -> JudgeRecorder | None:
        if not any(spec.name == "llm_judge" for spec in expectations):
            return None
        records = options.record_mode is RecordMode.ALL or (
            options.record_mode is not RecordMode.NONE and not path.is_file()
        )
        if options.live and records:
            from agentbench.runtime.openai_model import OpenAIModel

            name = suite.judge or options.model or (suite.model.name if suite.model else None)
            return cls(RecordingModel(OpenAIModel(name, base_url=options.base_url)), path)
        if path.is_file():
            return cls(ReplayModel(Cassette.load(path)), path)
        return cls(_Unrecorded(path), path)

    def save(self, *, record: bool) -> None:
        if record and isinstance(self.model, RecordingModel) and self.model.cassette.interactions:
            self.model.cassette.save(self.path)

    async def aclose(self) -> None:
        """Let go of a live judge's connections, which belong to the trial's event loop."""
        closer = getattr(self.model, "aclose", None)
        if closer is not None:
            await closer()
