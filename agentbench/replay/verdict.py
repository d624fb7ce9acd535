"""What a divergence means for the recorded answers after it, in one line.

Once a replayed run's requests drift from its recording, every recorded answer from there on
answered a request the code no longer sends: the steps after the divergence are counterfactual.
Every output that reports a diverged replay (the replay report, the eval summary, `--json`,
JUnit, the HTML report) says so with these words.
"""

from __future__ import annotations

from typing import Any


def divergence_verdict(found: dict[str, Any]) -> str:
    """`diverged at step 1 (refunds); steps after 1 replayed from a recording that no longer
    applies`, or what happened instead (continued live, stopped by --strict, or ended where
    the recording had no answer)."""
    step, agent = found.get("step"), found.get("agent")
    where = f"step {step}" + (f" ({agent})" if agent else "") if step is not None else "a step"
    if found.get("live_from"):
        return (
            f"diverged at {where}; continued live from model call #{found['live_from']}: "
            "the steps after it are the live model's answers"
        )
    if found.get("unanswered"):
        return (
            f"diverged at {where}; the recording has no answer for model call "
            f"#{found.get('call')}, so the replay ended there in an error of its own"
        )
    if found.get("stopped"):
        return f"diverged at {where}; replay stopped at model call #{found.get('call')} (--strict)"
    if found.get("class") == "request_drift" or step is None:
        # The drifted call is itself the first difference: its own answer is counterfactual.
        return (
            f"diverged at {where}; its model call and the steps after it replayed from a "
            "recording that no longer applies"
        )
    return (
        f"diverged at {where}; steps after {step} replayed from a recording that no longer applies"
    )
