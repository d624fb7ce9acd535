"""The `agentbench` subcommands, one module per command group; `cli.py` registers them."""
