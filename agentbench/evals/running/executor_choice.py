"""`--executor NAME`: the executor an eval's trials run on.

Kept apart from `executors`: the Ray executor imports it and the harness (its workers run
trials with the harness), and the harness imports it too, so were the choice made there, the
three would import one another.
"""

from __future__ import annotations

from pathlib import Path

from agentbench.errors import UsageError
from agentbench.evals.running.executors import Executor, LocalExecutor


def make_executor(name: str, address: str | None = None, root: Path | None = None) -> Executor:
    """The executor `--executor NAME` asks for."""
    if name == "local":
        if address is not None:
            raise UsageError("--ray-address goes with --executor ray")
        return LocalExecutor()
    if name == "ray":
        # Lazily: importing ray takes seconds, and only `--executor ray` needs it.
        try:
            from agentbench.evals.running.ray_executor import RayExecutor
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] == "ray":
                raise UsageError(
                    "--executor ray needs the ray extra: pip install 'agentbench[ray]'"
                ) from None
            raise
        return RayExecutor(address=address, root=root)
    raise UsageError(f"--executor {name!r}: expected local or ray")
