"""OpenTelemetry GenAI spans out of agentbench and into it (the `otel` extra).

* `OTelHook(tracer_provider=...)`: a runner hook that emits a run's spans live;
* `export_runs(store, run_ids, path, content=...)` (`agentbench traces export-otel`): stored
  runs as OTLP/JSON spans;
* `import_files(store, paths)` (`agentbench traces import-otel`): OTLP/JSON GenAI spans —
  agentbench's own, the official openai-v2 instrumentation's, OpenInference's — as stored
  runs that `promote` turns into golden cases.

Names follow the GenAI semantic conventions; see `conventions` for when content is written.
"""

from agentbench.otel.export import export_runs
from agentbench.otel.hook import OTelHook
from agentbench.otel.importer import import_files

__all__ = ["OTelHook", "export_runs", "import_files"]
