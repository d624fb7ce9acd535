"""`agentbench serve`: agents behind an OpenAI-compatible HTTP API, every request a trace.

Needs the `serve` extra (FastAPI, uvicorn, prometheus-client).
"""

from agentbench.serve.app import create_app
from agentbench.serve.callers import Caller, Keyring
from agentbench.serve.server import DrainingServer, server_config
from agentbench.serve.service import ServeSettings, Service, served_agents

__all__ = [
    "Caller",
    "DrainingServer",
    "Keyring",
    "ServeSettings",
    "Service",
    "create_app",
    "served_agents",
    "server_config",
]
