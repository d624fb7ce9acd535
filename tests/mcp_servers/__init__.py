"""Small MCP servers of the project's own, for the faults real servers do not make on demand."""
