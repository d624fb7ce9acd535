"""Shared test setup: no test may reach a network by accident.

Outbound connections are allowed only to loopback (the bundled OpenAI-compatible server);
provider credentials from the developer's environment are removed so nothing goes live. Parsed
cassettes are cached in a folder of the test session's own, not the developer's. Tests run on
pytest-xdist workers, one per core: what a test writes lives under its own tmp_path.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import ipaddress
import socket
import sys
import weakref
from collections.abc import Iterator

import pytest
import sdk_clients

# The module, not the function `agentbench.trace` re-exports under the same name.
code_version_module = importlib.import_module("agentbench.trace.code_version")

# The mcp SDK takes `sys.stderr` as `stdio_client`'s default errlog when it is first imported,
# and the OpenAI Agents SDK's stdio MCP client (golden/openai_agents_mcp) uses that default.
# Imported here it is the session's stream, open to the end; imported in a test, it would be
# that test's capsys or capfd stream, closed (or without a descriptor) for every later test.
with contextlib.suppress(ImportError):  # without the `mcp` extra its suites are skipped
    importlib.import_module("mcp.client.stdio")

_real_connect = socket.socket.connect
# The sockets the running test connected (see `_no_network`).
_connected: list[weakref.ref[socket.socket]] = []


def _loopback_only(self: socket.socket, address: object) -> object:
    if self.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        host = str(address[0])
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        _connected.append(weakref.ref(self))
    return _real_connect(self, address)


@pytest.fixture(autouse=True, scope="session")
def _own_cassette_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("agentbench-cache")))
        yield


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loopback only, no provider credentials; and a client socket this test left open is
    reported here, not in whichever later test the garbage collector frees it in.

    A client dropped unclosed (an SDK client in a reference cycle, as the openai SDK's is)
    keeps its socket until a collection frees it, whose `ResourceWarning` — an error here —
    would fail an unrelated test at random. When the test leaves a socket it connected still
    open, a collection runs at its teardown: whatever of its own was garbage goes then.
    """
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "AGENTBENCH_MODEL"):
        monkeypatch.delenv(name, raising=False)
    _connected.clear()
    yield
    sdk_clients.close_all()
    left_open = any(
        sock is not None and sock.fileno() != -1 for sock in (ref() for ref in _connected)
    )
    _connected.clear()
    if left_open:
        gc.collect()


@pytest.fixture(autouse=True)
def _unanchored_code_version() -> object:
    """`agentbench run` anchors the code version at the suites' repository, process-wide
    (a CLI process runs one command); tests run many in one process."""
    yield
    code_version_module._anchor = None
    code_version_module.code_version.cache_clear()


def _forget_suite_code() -> None:
    for name in [m for m in sys.modules if m == "golden" or m.startswith("golden.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _fresh_suite_code() -> object:
    """Each test imports the suites' agent code afresh: tests run copies of the shipped
    suites (changed, broken) under the same package name, and `load_object` puts a copy's
    root first on sys.path — what one test imported must not be what the next one runs."""
    path = list(sys.path)
    _forget_suite_code()
    yield
    sys.path[:] = path
    _forget_suite_code()


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadscope` (pyproject's addopts) hands the workers a test file at a time."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.work_units import FileScheduling

    return FileScheduling(config, log)


pytest_plugins = ["pytester"]
