"""The LLM judge: through the real openai SDK to the local server, recorded, and replayed."""

from __future__ import annotations

import dataclasses

import pytest

from agentbench import ChatResponse, OpenAIModel, RetryPolicy, Runner, ScriptedModel
from agentbench.evals.scorers import ScoreContext, build_scorer
from agentbench.evals.scorers.judge import SYSTEM_PROMPT, parse_verdict
from agentbench.replay.cassette import Cassette
from agentbench.replay.models import RecordingModel, ReplayModel
from agentbench.runtime.agent import Agent
from agentbench.testing import HTTPFault, OpenAICompatibleServer

pytestmark = pytest.mark.server

RUBRIC = "Gives the temperature in Paris in Celsius."
VERDICT = '{"score": 0.9, "reason": "States 21 °C for Paris."}'


@pytest.fixture
async def ctx() -> ScoreContext:
    result = await Runner.run(
        Agent(name="weather"), "How warm is Paris?", model=ScriptedModel(["21 °C in Paris."])
    )
    return ScoreContext.from_runs("paris", "How warm is Paris?", [result])


def judge_model(server: OpenAICompatibleServer) -> OpenAIModel:
    return OpenAIModel(
        "judge-model",
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_attempts=1),
    )


async def test_judge_scores_through_the_openai_sdk(ctx) -> None:
    with OpenAICompatibleServer([ChatResponse(text=VERDICT)]) as server:
        model = judge_model(server)
        result = await build_scorer("llm_judge", RUBRIC).score(_with_judge(ctx, model))
        await model.aclose()
    assert (result.passed, result.value) == (True, 0.9)
    assert result.reason == "judge score 0.90 ≥ 0.7: States 21 °C for Paris."
    [received] = server.requests
    body = received.body
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    prompt = body["messages"][1]["content"]
    assert f"Rubric:\n{RUBRIC}" in prompt
    assert "Input:\nHow warm is Paris?" in prompt
    assert "Final answer:\n21 °C in Paris." in prompt


async def test_judge_is_deterministic_when_replayed(ctx, tmp_path) -> None:
    judge = build_scorer("llm_judge", {"rubric": RUBRIC, "pass_threshold": 0.95})
    with OpenAICompatibleServer([ChatResponse(text=VERDICT)]) as server:
        live = judge_model(server)
        recording = RecordingModel(live)
        first = await judge.score(_with_judge(ctx, recording))
        await live.aclose()
    path = recording.cassette.save(tmp_path / "judge" / "paris.yaml")

    # The server is gone: the second scoring can only come from the cassette.
    replay = ReplayModel(Cassette.load(path), strict=True)
    second = await judge.score(_with_judge(ctx, replay))
    assert replay.exhausted and not replay.drifts
    assert (second.value, second.passed, second.reason) == (first.value, first.passed, first.reason)
    assert second.reason == "judge score 0.90 < 0.95: States 21 °C for Paris."


async def test_judge_failures_are_error_scores(ctx) -> None:
    judge = build_scorer("llm_judge", RUBRIC)
    missing = await judge.score(ctx)
    assert missing.error is not None and not missing.passed
    assert missing.reason.startswith("no judge model is configured")

    with OpenAICompatibleServer(
        [HTTPFault(400, "bad request"), ChatResponse(text="I like it")]
    ) as server:
        model = judge_model(server)
        failed = await judge.score(_with_judge(ctx, model))
        unreadable = await judge.score(_with_judge(ctx, model))
        await model.aclose()
    assert failed.error is not None
    assert failed.reason.startswith("the judge model judge-model failed: ModelError:")
    assert unreadable.error is not None
    assert unreadable.reason.startswith("the judge's answer has no score")


@pytest.mark.parametrize(
    ("answer", "score", "note"),
    [
        ('{"score": 0.4, "reason": "vague"}', 0.4, ""),
        ('```json\n{"score": "0.75", "reason": "ok"}\n```', 0.75, "```json block"),
        ('Verdict: {"score": 1, "reason": "exact"} — done', 1.0, "first JSON object"),
        ('{"score": 8, "reason": "good"}', 0.8, "out of 10"),
        ('{"score": 85, "reason": "good"}', 0.85, "percentage"),
        ('{"passed": true, "reason": "fine"}', 1.0, ""),
        ("Score: 0.3. The answer misses the unit.", 0.3, "prose"),
    ],
)
def test_verdicts_are_parsed_tolerantly(answer, score, note) -> None:
    parsed = parse_verdict(answer)
    assert parsed is not None
    assert parsed[0] == pytest.approx(score)
    assert note in parsed[2]


def test_an_answer_without_a_score_is_no_verdict() -> None:
    assert parse_verdict("I think it is fine.") is None


def _with_judge(ctx: ScoreContext, judge) -> ScoreContext:
    return dataclasses.replace(ctx, judge=judge)
