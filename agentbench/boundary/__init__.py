"""Boundary targets: any agent, recorded and replayed where it talks to its model.

A suite's agent may be a plain function (`fn(input, target)`, sync or async) built on any
framework or HTTP client. Its model calls go to a loopback server (`server.py`, one per case)
whose URL it gets as its OpenAI base URL: the server normalizes each request to one
chat-completions shape (`wire.py`, `chat_api.py`, `responses_api.py`), answers it from the
case's cassette or a live endpoint through the same `ReplayModel` / `RecordingModel` an
agentbench `Agent` is replayed with, and turns the traffic into the runtime's typed events
(`traffic.py`), so drift, the trajectory, scorers, reports and the gate are computed once.
An agent started outside the harness, in any language, reaches the same server through
`agentbench proxy` (`proxy.py`), which matches calls by content rather than order.
"""
