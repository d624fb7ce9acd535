"""A stub MCP server for the `openai_agents_mcp` suite: a warehouse's stock, over stdio.

    python -m golden.openai_agents_mcp.stock_server

Two tools with fixed data, so every answer is deterministic: `find_part` (structured content)
and `reserve_part` (an `isError` result when too few are in stock: the tool's own "no").
Nothing is kept between calls.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

PARTS: dict[str, dict[str, Any]] = {
    "A-100": {"name": "hydraulic pump seal", "in_stock": 14, "bin": "R3-07"},
    "B-200": {"name": "drive belt 1.2 m", "in_stock": 2, "bin": "R1-02"},
}

server = MCPServer("agentbench-stock", version="1")


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


if __name__ == "__main__":
    server.run()
