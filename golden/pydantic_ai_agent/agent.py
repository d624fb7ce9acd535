"""A bank's support assistant built with pydantic-ai: the user's own agent, tested unchanged.

`bank_desk` is what agentbench runs (`agent: golden.pydantic_ai_agent.agent:bank_desk`): the
case's input and a TargetContext in, the assistant's answer out. Everything else is plain
pydantic-ai as its users write it — an `Agent` with tools taking `RunContext[Customer]`, a tool
that refuses with `ModelRetry`, and agent delegation: `review_transaction` runs a second
agent, the fraud analyst, with `usage=ctx.usage`, whose answer is a structured `FraudVerdict`
(`output_type`). The model is an `OpenAIChatModel` pointed at `target.base_url`, where
agentbench records or replays every model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agentbench import TargetContext

ACCOUNTS: dict[str, dict[str, Any]] = {
    "CHK-1": {"owner": "ada", "kind": "checking", "balance": 1240.5, "currency": "EUR"},
    "SAV-2": {"owner": "ada", "kind": "savings", "balance": 8800.0, "currency": "EUR"},
    "CHK-7": {"owner": "grace", "kind": "checking", "balance": 310.25, "currency": "EUR"},
}
TRANSACTIONS: dict[str, dict[str, Any]] = {
    "T-901": {"account": "CHK-1", "date": "2026-06-27", "merchant": "Corner Coffee",
              "amount": -4.2},
    "T-902": {"account": "CHK-1", "date": "2026-06-28", "merchant": "City Rent",
              "amount": -950.0},
    "T-903": {"account": "CHK-1", "date": "2026-06-29", "merchant": "QuickPay*GLOBALGEMS",
              "amount": -612.99},
}  # fmt: skip
MERCHANTS: dict[str, dict[str, Any]] = {
    "Corner Coffee": {"category": "cafe", "country": "DE", "first_seen": "2024-01-03",
                      "chargebacks": 0},
    "City Rent": {"category": "housing", "country": "DE", "first_seen": "2023-09-01",
                  "chargebacks": 0},
    "QuickPay*GLOBALGEMS": {"category": "jewellery", "country": "unknown",
                            "first_seen": "2026-06-29", "chargebacks": 17},
}  # fmt: skip
CARDS: dict[str, str] = {"C-77": "CHK-1", "C-80": "CHK-7"}


@dataclass
class Customer:
    """Who is asking: the case's `context: {customer: ...}`."""

    name: str


class FraudVerdict(BaseModel):
    """The fraud analyst's finding on one transaction."""

    transaction_id: str
    verdict: Literal["likely_fraud", "looks_legitimate"]
    reason: str


desk = Agent(
    deps_type=Customer,
    instructions=(
        "You are the support assistant of Northwind Bank. Use the tools for every figure; "
        "never guess balances. Ask the fraud analyst about any charge the customer does not "
        "recognise."
    ),
    name="bank_desk",
)
fraud_analyst = Agent(
    deps_type=Customer,
    output_type=FraudVerdict,
    instructions=(
        "You review one card transaction for fraud. Look the transaction up, then its "
        "merchant, and give your verdict with a one-sentence reason."
    ),
    name="fraud_analyst",
)


@desk.instructions
def customer_name(ctx: RunContext[Customer]) -> str:
    return f"The customer is {ctx.deps.name}."


def _own_account(ctx: RunContext[Customer], account_id: str) -> dict[str, Any]:
    account = ACCOUNTS.get(account_id.upper())
    if account is None or account["owner"] != ctx.deps.name:
        raise ModelRetry(f"{account_id} is not an account of {ctx.deps.name}")
    return account


@desk.tool
def account_balance(ctx: RunContext[Customer], account_id: str) -> dict[str, Any]:
    """The current balance of one of the customer's accounts.

    Args:
        account_id: The account id, e.g. "CHK-1".
    """
    account = _own_account(ctx, account_id)
    return {"account_id": account_id.upper(), "balance": account["balance"],
            "currency": account["currency"]}  # fmt: skip


@desk.tool
def recent_transactions(
    ctx: RunContext[Customer], account_id: str, limit: int = 3
) -> list[dict[str, Any]]:
    """The account's most recent card transactions, newest first.

    Args:
        account_id: The account id, e.g. "CHK-1".
        limit: How many transactions to list.
    """
    _own_account(ctx, account_id)
    rows = [{"id": tid, **t} for tid, t in TRANSACTIONS.items() if t["account"] == account_id]
    return sorted(rows, key=lambda row: row["date"], reverse=True)[:limit]


@desk.tool
def freeze_card(ctx: RunContext[Customer], card_id: str, reason: str) -> dict[str, str]:
    """Freeze a card at once; the customer can unfreeze it in the app.

    Args:
        card_id: The card id, e.g. "C-77".
        reason: Why the customer wants it frozen.
    """
    account = CARDS.get(card_id.upper())
    if account is None or ACCOUNTS[account]["owner"] != ctx.deps.name:
        raise ModelRetry(f"{card_id} is not a card of {ctx.deps.name}")
    return {"card_id": card_id.upper(), "status": "frozen", "reference": f"FRZ-{card_id.upper()}"}


@desk.tool
async def review_transaction(ctx: RunContext[Customer], transaction_id: str) -> FraudVerdict:
    """Ask the fraud analyst whether a transaction is fraudulent.

    Args:
        transaction_id: The transaction id, e.g. "T-903".
    """
    result = await fraud_analyst.run(
        f"Review transaction {transaction_id} of customer {ctx.deps.name}.",
        model=ctx.model,
        deps=ctx.deps,
        usage=ctx.usage,
    )
    return result.output


@fraud_analyst.tool_plain
def transaction_details(transaction_id: str) -> dict[str, Any]:
    """Date, merchant and amount of a transaction.

    Args:
        transaction_id: The transaction id, e.g. "T-903".
    """
    found = TRANSACTIONS.get(transaction_id.upper())
    if found is None:
        raise ModelRetry(f"no transaction {transaction_id}")
    return {"id": transaction_id.upper(), **found}


@fraud_analyst.tool_plain
def merchant_profile(merchant: str) -> dict[str, Any]:
    """What the bank knows about a merchant: category, country, first seen, chargebacks.

    Args:
        merchant: The merchant's name as it appears on the transaction.
    """
    profile = MERCHANTS.get(merchant)
    if profile is None:
        raise ModelRetry(f"no merchant {merchant!r}")
    return {"merchant": merchant, **profile}


def _conversation(input: str | list[dict[str, Any]]) -> tuple[str, list[ModelMessage]]:
    """This turn's prompt and the conversation before it, as pydantic-ai's message history."""
    if isinstance(input, str):
        return input, []
    *before, last = input
    history: list[ModelMessage] = []
    for message in before:
        if message["role"] == "assistant":
            history.append(ModelResponse(parts=[TextPart(content=message["content"])]))
        else:
            history.append(ModelRequest(parts=[UserPromptPart(content=message["content"])]))
    return last["content"], history


async def bank_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One turn of the bank's support assistant."""
    prompt, history = _conversation(input)
    customer = Customer(name=target.variables.get("customer", "ada"))
    provider = OpenAIProvider(base_url=target.base_url, api_key=target.api_key)
    # Entered, the model closes the HTTP client its provider made when the turn is over.
    async with OpenAIChatModel(target.model, provider=provider) as model:
        result = await desk.run(prompt, message_history=history, model=model, deps=customer)
    return result.output
