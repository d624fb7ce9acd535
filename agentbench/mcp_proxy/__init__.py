"""`agentbench mcp-proxy`: record, replay and fault any MCP client's servers.

The proxy sits between an MCP client (an agentbench agent, the OpenAI Agents SDK, pydantic-ai,
Claude Desktop, anything that speaks MCP) and a real MCP server, over stdio or Streamable HTTP.

* `recording`: what a server said — its `initialize` answer, its lists (tools, resources,
  prompts) and every call — as data a cassette or a file of its own keeps.
* `proxy`: the one thing that decides, per message, whether the real server answers (and is
  recorded), the recording answers, or a fault does; and what differed from the recording.
* `upstream`: the real server, over stdio (a process) or Streamable HTTP (a URL).
* `stdio_front`, `http_front`: how a client reaches the proxy; `bridge` lets a client that
  starts a command reach a proxy that runs inside the harness.
* `servers`: a case's proxies, as the harness hands them to a boundary target.

This module imports nothing heavy: the bridge and the CLI start fast.
"""
