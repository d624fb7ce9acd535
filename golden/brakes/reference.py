"""Reference policy for the brakes suite: a model with bad habits, deterministically."""

from __future__ import annotations

import re
from typing import Any

from agentbench import ToolCall
from golden._reference import call, observations, results_of, route


def _stubborn_search(match: re.Match[str], request: dict[str, Any]) -> Any:
    # Keeps repeating the same search: the runtime warns on the 2nd, stops on the 3rd.
    return call("search_docs", query="printer driver")


def _runaway_reader(match: re.Match[str], request: dict[str, Any]) -> Any:
    pages = results_of(request, "read_page")
    return call("read_page", page=len(pages) + 1)


def _broken_json(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return ToolCall("search_docs", '{"query": "vpn setup"')  # truncated JSON
    if seen[-1].failed:
        return call("search_docs", query="vpn setup")
    return f"From the docs: {seen[-1].content}"


def _wrong_type(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return call("read_page", page="first")
    if seen[-1].failed:
        return call("read_page", page=1)
    return f"The first page says: {seen[-1].content}"


def _unknown_tool(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = observations(request)
    if not seen:
        return call("lookup_docs", query="vpn")
    if seen[-1].failed:
        return call("search_docs", query="vpn")
    return f"From the docs: {seen[-1].content}"


def _slow(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "slow_report")
    if not seen:
        return call("slow_report", name="weekly")
    if seen[-1].failed:
        return "The report service timed out; please try again later."
    return f"Here it is: {seen[-1].content}"


def _charge(match: re.Match[str], request: dict[str, Any]) -> Any:
    seen = results_of(request, "charge_card")
    if not seen:
        return call("charge_card", amount=float(match.group(1)))
    return f"Done: {seen[-1].content}."


RULES = [
    (r"printer", _stubborn_search),
    (r"incident log", _runaway_reader),
    (r"vpn", _broken_json),
    (r"first page", _wrong_type),
    (r"docs about", _unknown_tool),
    (r"weekly report", _slow),
    (r"charge (\d+)", _charge),
]


def respond(request: dict[str, Any]) -> Any:
    return route(request, RULES, "How can I help?")
