"""An IT help desk built with the OpenAI Agents SDK: the user's own agent, tested unchanged.

`it_helpdesk` is what agentbench runs (`agent: golden.openai_agents.agent:it_helpdesk`): the
case's input and a TargetContext in, the final answer out. Everything else is plain Agents SDK
as its users write it — `@function_tool` functions, instructions that read the run's context
(who is asking), and a real handoff: the help desk transfers network trouble to the network
specialist (`handoffs=[...]`), whose instructions and tools then take over the run. The model
is the SDK's default, `OpenAIResponsesModel` (the Responses API), on an `AsyncOpenAI` client
pointed at `target.base_url`, where agentbench records or replays every model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agents import Agent, RunConfig, RunContextWrapper, Runner, function_tool
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from agentbench import TargetContext

EMPLOYEES: dict[str, dict[str, Any]] = {
    "jdoe": {"name": "Jane Doe", "department": "finance", "laptop": "LT-4411", "vpn": "eu-west"},
    "bkim": {"name": "Bo Kim", "department": "sales", "laptop": "LT-5012", "vpn": "us-east"},
}
SERVICES: dict[str, dict[str, str]] = {
    "email": {"status": "operational", "since": "2026-06-29 08:00"},
    "vpn": {"status": "operational", "since": "2026-06-28 22:15"},
    "wiki": {"status": "degraded", "since": "2026-06-30 07:40", "note": "search is slow"},
}
VPN_SESSIONS: dict[str, list[dict[str, Any]]] = {
    "jdoe": [
        {"gateway": "eu-west", "started": "09:02", "ended": "09:17", "drop": "idle timeout"},
        {"gateway": "eu-west", "started": "09:20", "ended": "09:34", "drop": "idle timeout"},
    ],
    "bkim": [{"gateway": "us-east", "started": "08:10", "ended": None, "drop": None}],
}
HOSTS: dict[str, int] = {"files.corp": 12, "print-3.corp": 48}  # round trip in ms


@dataclass
class Employee:
    """Who is asking: the case's `context: {username: ...}` (`stream: true` streams the run)."""

    username: str


@function_tool
def service_status(service: Literal["email", "vpn", "wiki"]) -> dict[str, str]:
    """The current status of a company service.

    Args:
        service: The service to check.
    """
    return {"service": service, **SERVICES[service]}


@function_tool
def open_ticket(
    ctx: RunContextWrapper[Employee], summary: str, priority: Literal["low", "normal", "high"]
) -> dict[str, str]:
    """Open a help desk ticket for the employee who is asking.

    Args:
        summary: One line saying what is wrong.
        priority: How urgent it is.
    """
    number = 7000 + sum(map(ord, summary)) % 1000
    return {"ticket": f"INC-{number}", "owner": ctx.context.username, "priority": priority}


@function_tool
def vpn_sessions(ctx: RunContextWrapper[Employee]) -> list[dict[str, Any]]:
    """Today's VPN sessions of the employee who is asking, oldest first."""
    return VPN_SESSIONS.get(ctx.context.username, [])


def _tell_the_model(ctx: RunContextWrapper[Any], error: Exception) -> str:
    # The SDK's default hides the exception from the model ("An error occurred while running
    # the tool"); this desk lets the model explain what went wrong.
    return f"ping failed: {error}"


@function_tool(failure_error_function=_tell_the_model)
def ping_host(host: str) -> dict[str, Any]:
    """Round-trip time to an internal host from the VPN gateway.

    Args:
        host: The host name, e.g. "files.corp".
    """
    if host not in HOSTS:
        raise LookupError(f"unknown host {host!r}")
    return {"host": host, "round_trip_ms": HOSTS[host]}


def _who(ctx: RunContextWrapper[Employee], agent: Agent[Employee]) -> str:
    employee = EMPLOYEES.get(ctx.context.username, {"name": ctx.context.username})
    return f"The employee asking is {employee['name']} ({ctx.context.username})."


def desk_instructions(ctx: RunContextWrapper[Employee], agent: Agent[Employee]) -> str:
    return (
        "You are the IT help desk of Contoso. Check service status before answering about a "
        "service, open tickets when asked, and hand VPN and network trouble to the network "
        "specialist. " + _who(ctx, agent)
    )


def specialist_instructions(ctx: RunContextWrapper[Employee], agent: Agent[Employee]) -> str:
    return (
        "You are Contoso's network specialist. Look at the employee's VPN sessions or ping the "
        "host they name, then explain what you found in two sentences. " + _who(ctx, agent)
    )


network_specialist = Agent[Employee](
    name="network_specialist",
    handoff_description="VPN drops, slow connections, unreachable hosts.",
    instructions=specialist_instructions,
    tools=[vpn_sessions, ping_host],
)
helpdesk = Agent[Employee](
    name="helpdesk",
    instructions=desk_instructions,
    tools=[service_status, open_ticket],
    handoffs=[network_specialist],
)


async def it_helpdesk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One turn of the IT help desk."""
    employee = Employee(username=target.variables.get("username", "jdoe"))
    # Closed when the turn is over, with the connections it opened.
    async with AsyncOpenAI(base_url=target.base_url, api_key=target.api_key) as client:
        config = RunConfig(
            model=OpenAIResponsesModel(target.model, openai_client=client),
            # The SDK's traces go to OpenAI's dashboard unless told otherwise; a test has no key.
            tracing_disabled=True,
        )
        if not target.variables.get("stream"):
            result = await Runner.run(helpdesk, input, context=employee, run_config=config)
            return str(result.final_output)
        # The chat window's path: the answer streamed (Server-Sent Events) as it is written.
        streamed = Runner.run_streamed(helpdesk, input, context=employee, run_config=config)
        shown: list[str] = []  # what a chat window shows, delta by delta
        async for event in streamed.stream_events():
            if event.type == "raw_response_event" and event.data.type.endswith("text.delta"):
                shown.append(event.data.delta)
        return str(streamed.final_output)
