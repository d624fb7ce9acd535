"""Test doubles for agentbench users and agentbench's own tests.

`ScriptedModel` and `FunctionModel` answer without any network; `OpenAICompatibleServer`
is a real HTTP server on 127.0.0.1 for exercising `OpenAIModel` through the real openai SDK,
optionally with a real server's quirks (`QUIRKS`, e.g. `quirks=["llama_cpp"]`).
"""

from agentbench.runtime.models import CallInfo, FunctionModel, ScriptedModel
from agentbench.testing.server import (
    QUIRKS,
    CutStream,
    Delay,
    HTTPFault,
    OpenAICompatibleServer,
    RawBody,
    ReceivedRequest,
    Trickle,
    completion_body,
    stream_chunks,
)

__all__ = [
    "QUIRKS",
    "CallInfo",
    "CutStream",
    "Delay",
    "FunctionModel",
    "HTTPFault",
    "OpenAICompatibleServer",
    "RawBody",
    "ReceivedRequest",
    "ScriptedModel",
    "Trickle",
    "completion_body",
    "stream_chunks",
]
