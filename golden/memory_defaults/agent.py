"""A hiking guide under the default memory policy, given only a token budget.

`MemoryPolicy(max_tokens=...)` leaves every other setting at its default: tool results cut at
2,000 characters, the 4 most recent units kept whole, older tool exchanges compressed by the
rule summarizer to 40-token heads, and tokens counted as the model's last reported usage plus
the default estimate of what was added since. `golden/memory` sets its own tight limits; this
suite is what a user gets without choosing them.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, MemoryPolicy, tool

CONDITIONS = {
    "ridge": ("Ridge", 2, "dry", "firm gravel, a little loose scree below the saddle"),
    "lake": ("Lake", 9, "muddy", "standing water on the boardwalk near the north shore"),
    "forest": ("Forest", 5, "damp", "wet roots under the pines, slippery on the descent"),
    "canyon": ("Canyon", 1, "dry", "dusty, hard-packed sand, no shade after noon"),
    "glacier": ("Glacier", 12, "icy", "crampons needed above the moraine, fresh snow"),
    "valley": ("Valley", 4, "damp", "soft meadow paths, two stream crossings ankle deep"),
}
NOTE = (
    " Rangers walk it every morning and post the report at the trailhead; conditions can "
    "change after rain, so check again before you set out, and tell someone your route. "
    "Parking at the trailhead fills by nine on weekends; the shuttle from the village runs "
    "every forty minutes. Dogs on a lead. Carry a map: phone reception drops in the upper "
    "sections, and the emergency number works from the two marked points only. Report fallen "
    "trees and damaged signs to the ranger station by the visitor centre."
)


@tool(effect="read_only", idempotent=True)
def trail_conditions(trail: str) -> str:
    """Today's conditions on a trail: mud, ice and footing.

    Args:
        trail: Trail name, e.g. "Ridge".
    """
    found = CONDITIONS.get(trail.strip().lower())
    if found is None:
        raise BusinessFailure(f"no trail named {trail!r}", data={"known": sorted(CONDITIONS)})
    name, mud, surface, footing = found
    return f"{name} trail: mud {mud}/10 ({surface}); {footing}.{NOTE}"


def _guide_paragraph(number: int) -> str:
    return (
        f"Section {number}: the path climbs through switchbacks marked with yellow posts; keep "
        "to the marked line, as the slope beside it is fragile and closed for replanting. "
    )


# 16 paragraphs of ~170 characters, then the one line that matters: far over 2,000 chars.
GUIDE = "".join(_guide_paragraph(n) for n in range(1, 17)) + (
    "Last water before the summit: the spring at the stone hut, 40 minutes above the saddle."
)


@tool(effect="read_only", idempotent=True, max_result_chars=10_000)
def trail_guide(trail: str) -> str:
    """The full route description of a trail (long).

    Args:
        trail: Trail name, e.g. "Ridge".
    """
    if trail.strip().lower() != "ridge":
        raise BusinessFailure(f"no guide for {trail!r} yet")
    return GUIDE


hiking_guide = Agent(
    name="hiking_guide",
    instructions=(
        "You are a hiking guide. Look trail conditions and route descriptions up with the "
        "tools; never guess them. Answer in one or two sentences."
    ),
    tools=[trail_conditions, trail_guide],
    memory=MemoryPolicy(max_tokens=900),
    # No "state so far" in the instructions: what memory keeps of the conversation is the
    # only place earlier results live, so the cases see memory's work alone.
    state_summary=False,
)
