"""An agent for exercising the brakes: loops, runaway searches, broken JSON, a hanging tool."""

from __future__ import annotations

import time

from agentbench import Agent, BusinessFailure, Limits, tool

DOCS = {"vpn": "Connect with the corporate VPN client; MFA is required."}


@tool(effect="read_only", idempotent=True)
def search_docs(query: str) -> str:
    """Search the internal documentation.

    Args:
        query: Search words.
    """
    for key, text in DOCS.items():
        if key in query.lower():
            return text
    return "no results"


@tool(effect="read_only", idempotent=True)
def read_page(page: int) -> str:
    """Read one page of the (very long) incident log.

    Args:
        page: Page number, from 1.
    """
    return f"page {page}: routine entries, nothing unusual"


@tool(effect="read_only", timeout_s=0.3)
def slow_report(name: str) -> str:
    """Fetch a generated report (the report service is slow).

    Args:
        name: Report name.
    """
    time.sleep(2)
    return f"report {name}"


@tool(effect="write")
def charge_card(amount: float) -> str:
    """Charge the customer's card on file.

    Args:
        amount: Amount in EUR.
    """
    if amount > 500:
        raise BusinessFailure("card declined: over the card's limit", stop=True)
    return f"charged {amount} EUR"


brakes_agent = Agent(
    name="brakes",
    description="A help-desk agent whose tools make the brakes of the loop visible.",
    instructions="You are a help-desk assistant. Use the tools; be brief.",
    tools=[search_docs, read_page, slow_report, charge_card],
    limits=Limits(max_iterations=5, timeout_s=60),
)
