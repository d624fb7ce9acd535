"""Reference policy for the pydantic-ai bank suite: the support desk and its fraud analyst.

Which agent is asking is told by its tools (the desk has `review_transaction`, the analyst
`merchant_profile`). A tool's refusal by `ModelRetry` reaches the model as the tool message
`{"error": "..."}` (pydantic-ai 2.68's retry prompt); the policy reads it as a failed lookup.
"""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import Observation, call, last_user, results_of

ACCOUNT = re.compile(r"\b((?:CHK|SAV)-\d+)\b", re.I)
CARD = re.compile(r"\b(C-\d+)\b")
TRANSACTION = re.compile(r"\b(T-\d{3})\b")


def _failed(observation: Observation) -> bool:
    found = observation.json()
    return isinstance(found, dict) and "error" in found


def _balances(request: dict[str, Any], accounts: list[str]) -> Any:
    seen = results_of(request, "account_balance")
    if not seen:
        # Every account asked about at once: parallel calls in one answer.
        return [call("account_balance", account_id=a) for a in accounts]
    lines = []
    for observation in seen:
        account = observation.arguments["account_id"]
        if _failed(observation):
            lines.append(f"I can't show account {account}: it is not one of yours.")
        else:
            found = observation.json()
            lines.append(f"{account}: {found['balance']:.2f} {found['currency']}.")
    return " ".join(lines)


def _transactions(request: dict[str, Any], account: str) -> Any:
    seen = results_of(request, "recent_transactions")
    if not seen:
        return call("recent_transactions", account_id=account, limit=3)
    if _failed(seen[-1]):
        return f"I can't show account {account}: it is not one of yours."
    rows = seen[-1].json()
    listed = "; ".join(
        f"{r['date']} {r['merchant']} {r['amount']:.2f} EUR ({r['id']})" for r in rows
    )
    return f"Your last transactions on {account}: {listed}."


def _freeze(request: dict[str, Any], card: str) -> Any:
    seen = results_of(request, "freeze_card")
    if not seen:
        return call("freeze_card", card_id=card, reason="customer does not recognise a charge")
    if _failed(seen[-1]):
        return f"I can't freeze card {card}: it is not one of yours."
    frozen = seen[-1].json()
    return f"Card {frozen['card_id']} is frozen (reference {frozen['reference']})."


def _review(request: dict[str, Any], transaction: str) -> Any:
    seen = results_of(request, "review_transaction")
    if not seen:
        return call("review_transaction", transaction_id=transaction)
    verdict = seen[-1].json()
    if verdict["verdict"] == "likely_fraud":
        return (
            f"Transaction {transaction} is likely fraud: {verdict['reason']} "
            "I can freeze your card right away if you like."
        )
    return f"Transaction {transaction} looks legitimate: {verdict['reason']}"


def _desk(request: dict[str, Any]) -> Any:
    question = last_user(request)
    card, transaction = CARD.search(question), TRANSACTION.search(question)
    accounts = [a.upper() for a in ACCOUNT.findall(question)]
    if card and re.search(r"freeze|block", question, re.I):
        return _freeze(request, card.group(1))
    if transaction:
        return _review(request, transaction.group(1))
    if accounts and re.search(r"transactions|charges", question, re.I):
        return _transactions(request, accounts[0])
    if accounts:
        return _balances(request, accounts)
    return "Which account do you mean? Its id looks like CHK-1."


def _analyst(request: dict[str, Any]) -> Any:
    transaction = TRANSACTION.search(last_user(request))
    if transaction is None:
        return call("final_result", transaction_id="", verdict="looks_legitimate", reason="")
    details = results_of(request, "transaction_details")
    if not details:
        return call("transaction_details", transaction_id=transaction.group(1))
    found = details[-1].json()
    profiles = results_of(request, "merchant_profile")
    if not profiles:
        return call("merchant_profile", merchant=found["merchant"])
    profile = profiles[-1].json()
    if profile["chargebacks"] > 5 or profile["first_seen"] == found["date"]:
        verdict = "likely_fraud"
        reason = (
            f"{found['merchant']} was first seen on {profile['first_seen']} and has "
            f"{profile['chargebacks']} chargebacks."
        )
    else:
        verdict = "looks_legitimate"
        reason = f"{found['merchant']} is a known {profile['category']} merchant since " + (
            f"{profile['first_seen']} with no chargebacks."
        )
    return call("final_result", transaction_id=found["id"], verdict=verdict, reason=reason)


def respond(request: dict[str, Any]) -> Any:
    names = {t["function"]["name"] for t in request.get("tools", ())}
    if "merchant_profile" in names:
        # Its own prefix: the analyst's conversation runs inside the desk's, so plain counts
        # would give two different calls of one run the same id.
        return _pinned(request, _analyst(request), "call_fraud")
    return _pinned(request, _desk(request), "call_desk")


def _pinned(request: dict[str, Any], answer: Any, prefix: str) -> Any:
    """The answer with its tool calls' ids pinned (`<prefix>_<n>`, counted through the
    conversation): the agent sends them back in every later request, so a re-recorded
    cassette's requests stay the same."""
    calls = [answer] if isinstance(answer, ToolCall) else answer
    if not (isinstance(calls, list) and calls):
        return answer
    seen = sum(len(m.get("tool_calls") or ()) for m in request["messages"])
    pinned = [
        ToolCall(c.name, c.arguments, id=f"{prefix}_{seen + n}") for n, c in enumerate(calls, 1)
    ]
    return pinned if isinstance(answer, list) else pinned[0]
