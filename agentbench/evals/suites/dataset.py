"""Golden suites, the public face: the models, loading, discovery and JSON Schemas.

```python
from agentbench.evals.suites.dataset import discover, load_suite

found = discover(["golden/"])
for error in found.errors:          # one per suite that failed to load, each listing problems
    print(error)
for suite in found.suites:
    for case in suite.cases:
        specs = suite.expectations_for(case)      # ScorerSpec, each with .file and .line
        scorers = [spec.build(base_dir=suite.root) for spec in specs]
```

The models live in `suite_models`, `case_models` and `expectations`, the file reading in
`suite_files`, the schemas in `suite_schema`; import them from here. A suite's `plugins` are
imported while it loads, so the `@scorer` functions they define can be named in expectations.
"""

from agentbench.evals.errors import ExpectationError, Problem, SuiteError, UnknownScorerError
from agentbench.evals.suites.case_models import Case, CaseContext
from agentbench.evals.suites.expectations import ScorerSpec, parse_expectation
from agentbench.evals.suites.suite_files import DiscoveryResult, discover, load_suite
from agentbench.evals.suites.suite_models import Pricing, Suite, SuiteModel, ToolsConfig
from agentbench.evals.suites.suite_schema import case_json_schema, suite_json_schema

__all__ = [
    "Case",
    "CaseContext",
    "DiscoveryResult",
    "ExpectationError",
    "Pricing",
    "Problem",
    "ScorerSpec",
    "Suite",
    "SuiteError",
    "SuiteModel",
    "ToolsConfig",
    "UnknownScorerError",
    "case_json_schema",
    "discover",
    "load_suite",
    "parse_expectation",
    "suite_json_schema",
]
