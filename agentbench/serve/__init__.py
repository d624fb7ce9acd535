"""`agentbench serve`: agents behind an OpenAI-compatible HTTP API, every request a trace.

Needs the `serve` extra (FastAPI, uvicorn, prometheus-client).
"""

from agentbench.serve.app import create_app
from agentbench.serve.service import ServeSettings, Service, served_agents

__all__ = ["ServeSettings", "Service", "create_app", "served_agents"]
