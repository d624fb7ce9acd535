"""`agentbench tools list module:attribute`: what an agent can do, tool by tool.

Each tool with its effect, timeout, whether it is safe to repeat, and where it comes from: a
Python function, an MCP server (the command or URL, never its environment or headers), a
fallback over other tools, or a handoff to another agent. Handoff targets and a router's
agents are listed too, each under its own name, so a multi-agent desk shows every tool it can
reach. Listing never starts an MCP server that a tool snapshot already describes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from agentbench.errors import UsageError
from agentbench.loading import load_object
from agentbench.runtime.agent import Agent
from agentbench.runtime.agent_tree import reachable_tools
from agentbench.runtime.tools import Tool

EPILOG = """\b
Examples:
  agentbench tools list golden.mcp_time.agent:clock_agent
  agentbench tools list myapp/agents.py:triage --json
"""


@click.group("tools", epilog=EPILOG)
def tools() -> None:
    """Inspect the tools of an agent."""


@tools.command("list", epilog=EPILOG)
@click.argument("ref", metavar="MODULE:ATTRIBUTE")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per tool, as a list.")
def list_tools(ref: str, as_json: bool) -> None:
    """List the tools of an agent (or a tool, or a list of tools) with effect, timeout,
    idempotency and source."""
    target = load_object(ref, what="tools list", search_path=Path.cwd())
    rows = list(_rows(target, ref))
    if as_json:
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    if not rows:
        click.echo(f"{ref}: no tools")
        return
    _print_table(rows)


def _rows(target: Any, ref: str) -> Iterator[dict[str, Any]]:
    if isinstance(target, Agent):
        yield from _agent_rows(target)
    elif isinstance(target, Tool):
        yield _row(None, target)
    elif isinstance(target, list | tuple) and all(isinstance(t, Tool) for t in target):
        yield from (_row(None, t) for t in target)
    else:
        raise UsageError(
            f"tools list {ref!r}: expected an Agent, a Tool or a list of tools; got "
            f"{type(target).__name__}"
        )


def _agent_rows(root: Agent) -> Iterator[dict[str, Any]]:
    """The agent's tools, then those of every agent it can hand over to (each once)."""
    for agent, item in reachable_tools(root):
        yield _row(agent.name, item)


def _row(agent: str | None, item: Tool) -> dict[str, Any]:
    return {
        "agent": agent,
        "tool": item.name,
        "effect": item.effect.value,
        "timeout_s": item.timeout_s,
        "idempotent": item.idempotent,
        "source": source_of(item),
    }


def source_of(item: Tool) -> str:
    """Where a tool comes from, in a few words."""
    own = getattr(item, "source", None)
    if isinstance(own, str):  # MCP tools and fallbacks say it themselves
        return own
    target = getattr(item, "handoff_target", None)
    if target is not None:
        return f"handoff → {target.name}"
    if getattr(item, "routes", None) is not None:
        return "router dispatch"
    fn = item.fn
    return f"python {getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', item.name)}"


def _print_table(rows: list[dict[str, Any]]) -> None:
    show_agent = len({row["agent"] for row in rows}) > 1
    header = ["tool", "effect", "timeout", "idempotent", "source"]
    if show_agent:
        header.insert(0, "agent")
    lines = [header]
    for row in rows:
        timeout = "none" if row["timeout_s"] is None else f"{row['timeout_s']:g} s"
        cells = [row["tool"], row["effect"], timeout, "yes" if row["idempotent"] else "no"]
        cells.append(row["source"])
        lines.append([row["agent"] or "", *cells] if show_agent else cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        padded = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        click.echo("  ".join([*padded, line[-1]]))
