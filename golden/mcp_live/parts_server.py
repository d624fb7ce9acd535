"""A stub MCP server for the `mcp_live` suite: a spare-parts warehouse over stdio.

    python -m golden.mcp_live.parts_server

Three tools with fixed data, so every answer is deterministic: `find_part` (structured
content), `reserve_part` (an `isError` result when the stock is too low, the tool's own "no")
and `part_history` (structured content beside text that says more). Nothing is kept between
calls: one server process serves every case of a run, in any order.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

PARTS: dict[str, dict[str, Any]] = {
    "A-100": {"name": "hydraulic pump seal", "in_stock": 14, "bin": "R3-07"},
    "B-200": {"name": "drive belt 1.2 m", "in_stock": 2, "bin": "R1-02"},
    "C-300": {"name": "bearing 6204-2RS", "in_stock": 40, "bin": "R2-11"},
}
HISTORY: dict[str, tuple[dict[str, Any], str]] = {
    "C-300": (
        {"restocked": "2026-11-20", "returns": 3},
        "Restocked on 2026-11-20. 3 returned this year, all from the same batch (lot 7741).",
    ),
}

server = MCPServer("agentbench-parts", version="1")


def _part(sku: str) -> dict[str, Any]:
    part = PARTS.get(sku.strip().upper())
    if part is None:
        raise ToolError(f"no part with SKU {sku}")
    return part


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def find_part(sku: str) -> dict[str, Any]:
    """Look a spare part up by its SKU: its name, how many are in stock, and its bin."""
    return {"sku": sku.strip().upper(), **_part(sku)}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def reserve_part(sku: str, quantity: int) -> dict[str, Any]:
    """Reserve parts for a job; refused when fewer are in stock."""
    part = _part(sku)
    if quantity > part["in_stock"]:
        raise ToolError(
            f"only {part['in_stock']} of {sku.upper()} in stock; cannot reserve {quantity}"
        )
    return {"reservation": f"RES-{sku.upper()}-{quantity}", "quantity": quantity}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def part_history(sku: str) -> CallToolResult:
    """When a part was last restocked and how many came back."""
    _part(sku)
    structured, text = HISTORY.get(sku.strip().upper(), ({}, "No history on file."))
    content = [TextContent(type="text", text=text)]
    return CallToolResult(content=content, structured_content=structured)


if __name__ == "__main__":
    server.run()
