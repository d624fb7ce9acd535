"""A support desk whose tools reach the runtime's less-travelled paths.

Every agent here keeps the default `Limits`, so a runaway search meets the default brakes; one
tool returns a log far over the default tool-result limit; another writes a request-scope
variable before the hand-off to the escalation agent, which must not receive it.
"""

from __future__ import annotations

from agentbench import Agent, BusinessFailure, RunContext, tool

TICKETS = {
    "T-17": {"title": "VPN drops every hour", "status": "open", "history": ["opened", "triaged"]},
    "T-18": {"title": "Printer offline", "status": "closed", "history": ["opened", "fixed"]},
}


def _log_line(number: int) -> str:
    return f"{number:04d} INFO checkout request served in {90 + number % 40} ms\n"


# 120 lines of ~47 characters: far over the 2,000-character limit a tool result is cut to.
LOG = "".join(_log_line(n) for n in range(1, 121))


@tool(effect="read_only", idempotent=True)
def fetch_log(service: str) -> str:
    """Today's log of a service, oldest line first.

    Args:
        service: Service name, e.g. "checkout".
    """
    if service != "checkout":
        raise BusinessFailure(f"no log for {service!r}")
    return LOG


@tool(effect="read_only", idempotent=True)
def search_kb(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: Search words.
    """
    return f"no articles match {query!r}"


@tool(effect="read_only", idempotent=True)
def lookup_ticket(ticket_id: str, include_history: bool = False) -> dict:
    """A support ticket: title and status, and its history if asked for.

    Args:
        ticket_id: Ticket id, e.g. "T-17".
        include_history: Also return the ticket's history.
    """
    ticket = TICKETS.get(ticket_id.upper())
    if ticket is None:
        raise BusinessFailure(f"no ticket {ticket_id!r}")
    shown = {"ticket_id": ticket_id.upper(), "title": ticket["title"], "status": ticket["status"]}
    if include_history:
        shown["history"] = ticket["history"]
    return shown


@tool(effect="write", idempotent=True)
def open_escalation(ctx: RunContext, ticket_id: str) -> str:
    """Open an escalation for a ticket, before handing it to the escalation team.

    Args:
        ticket_id: Ticket id, e.g. "T-17".
    """
    # The ticket travels with the conversation; the one-time token is for this request only.
    ctx.set("ticket_id", ticket_id.upper())
    ctx.set("escalation_token", f"esc-{ticket_id.upper()}-7f3a", scope="request")
    return f"escalation opened for {ticket_id.upper()}"


escalations = Agent(
    name="escalations",
    description="The escalation team: takes over tickets triage escalated.",
    instructions=(
        "You handle escalated tickets."
        "{% if desk is defined and desk.ticket_id is defined %} The ticket is "
        "{{ desk.ticket_id }}.{% endif %}"
        "{% if desk is defined and desk.escalation_token is defined %} Escalation token: "
        "{{ desk.escalation_token }}.{% endif %} Confirm who owns the ticket now."
    ),
    reads=["desk"],
)

desk = Agent(
    name="desk",
    description="First-line support: logs, the knowledge base, tickets, escalations.",
    instructions=(
        "You are first-line support. Use the tools; be brief. Escalate a ticket with "
        "open_escalation, then hand it to the escalation team."
    ),
    tools=[fetch_log, search_kb, lookup_ticket, open_escalation],
    handoffs=[escalations],
)
