"""A stub MCP server for the `pydantic_ai_mcp` suite: a bike workshop's stock, over stdio.

    python -m golden.pydantic_ai_mcp.stock_server

Two tools with fixed data, so every answer is deterministic: `find_part` (structured content)
and `reserve_part` (an `isError` result when too few are in stock: the tool's own "no").
Nothing is kept between calls. The suite's agent reaches it over Streamable HTTP, through
agentbench's MCP proxy, which starts this server as a command.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

PARTS: dict[str, dict[str, Any]] = {
    "K-410": {"name": "hydraulic brake caliper", "in_stock": 9, "bin": "A2-11"},
    "M-520": {"name": "chain tensioner", "in_stock": 1, "bin": "B4-03"},
}

server = MCPServer("agentbench-bike-stock", version="1")


def _part(sku: str) -> dict[str, Any]:
    part = PARTS.get(sku.strip().upper())
    if part is None:
        raise ToolError(f"no part with SKU {sku}")
    return part


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def find_part(sku: str) -> dict[str, Any]:
    """Look a bike part up by its SKU: its name, how many are in stock, and its bin."""
    return {"sku": sku.strip().upper(), **_part(sku)}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def reserve_part(sku: str, quantity: int) -> dict[str, Any]:
    """Reserve parts for a repair; refused when fewer are in stock."""
    part = _part(sku)
    if quantity > part["in_stock"]:
        raise ToolError(
            f"only {part['in_stock']} of {sku.upper()} in stock; cannot reserve {quantity}"
        )
    return {"reservation": f"RES-{sku.upper()}-{quantity}", "quantity": quantity}


if __name__ == "__main__":
    server.run()
