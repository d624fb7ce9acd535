"""Golden suites on disk: what loads, and errors that name the file, line, column and field."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentbench.evals.scorers import SCORERS
from agentbench.evals.suites.dataset import Case, ExpectationError, SuiteError, discover, load_suite
from agentbench.replay.tool_policy import ToolPolicy
from agentbench.runtime.models import Usage

SUITE = """\
# yaml-language-server: $schema=../../schema/suite.schema.json
description: Weather questions.
agent: golden.weather.agent:agent
model:
  name: gpt-4o-mini
  settings: {temperature: 0, seed: 7}
  pricing: {input_per_mtok: 0.15, output_per_mtok: 0.6}
judge: gpt-4o-mini
tools:
  default: recorded
  overrides:
    get_time: 'stub:"12:00"'
    search: fault:timeout
scorers:
  - stop_reason: completed
  - max_steps: 6
trials: 2
cases:
  - id: paris
    input: How warm is Paris?
    context: {user: Ada}
    expect:
      - tool_called: {name: get_weather, args: {city: Paris}}
      - output_contains: ["21", Paris]
"""

CASES_YAML = """\
- id: oslo-then-paris
  inputs:
    - Weather in Oslo?
    - And Paris?
  context:
    session: {user: Ada}
    request: {locale: fr}
  expect:
    - trajectory:
        mode: superset
        expected:
          - {tool: get_weather, args: {city: Oslo}}
          - {handoff: refunds}
    - llm_judge: Answers both cities.
- id: atlantis
  input: [{role: user, content: "Weather in Atlantis?"}]
  xfail: true
  skip: not recorded yet
  trials: 5
  cassette: shared/atlantis.yaml
  expect:
    - stop_reason: [completed, business_stop]
    - stop_reason
"""


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text) if not name.endswith(".jsonl") else text)
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    write(
        tmp_path / "golden" / "weather",
        {
            "suite.yaml": SUITE,
            "cases/a_more.yaml": CASES_YAML,
            "cases/b_one.yml": "id: single\ninput: hi\n",
            "cases/c_wrapped.yaml": "cases:\n  - id: wrapped\n    input: hi\n",
            "cases/d_rows.jsonl": '{"id": "rome", "input": "Rome?"}\n\n'
            '{"id": "milan", "input": "Milan?", "expect": [{"output_number": 24}]}\n',
        },
    )
    return tmp_path


def test_a_suite_loads_with_every_case_and_where_it_was_written(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather")
    assert suite.name == "weather" and suite.agent == "golden.weather.agent:agent"
    assert [c.id for c in suite.cases] == [
        "paris",
        "oslo-then-paris",
        "atlantis",
        "single",
        "wrapped",
        "rome",
        "milan",
    ]
    folder = repo / "golden" / "weather"
    sources = {c.id: (c.source[0].relative_to(folder), c.source[1]) for c in suite.cases}
    assert sources == {
        "paris": (Path("suite.yaml"), 19),
        "oslo-then-paris": (Path("cases/a_more.yaml"), 1),
        "atlantis": (Path("cases/a_more.yaml"), 15),
        "single": (Path("cases/b_one.yml"), 1),
        "wrapped": (Path("cases/c_wrapped.yaml"), 2),
        "rome": (Path("cases/d_rows.jsonl"), 1),
        "milan": (Path("cases/d_rows.jsonl"), 3),
    }
    paris = suite.case("paris")
    [tool_spec, contains] = paris.expect
    assert (tool_spec.name, tool_spec.params) == (
        "tool_called",
        {"name": "get_weather", "args": {"city": "Paris"}},
    )
    assert (tool_spec.line, tool_spec.column, tool_spec.field) == (23, 9, "cases[0].expect[0]")
    assert contains.where == f"{folder / 'suite.yaml'}:24"
    assert suite.case("milan").expect[0].line == 3


def test_suite_settings(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather" / "suite.yaml")
    assert suite.model is not None and suite.model.settings.temperature == 0
    assert suite.model.pricing is not None
    assert suite.model.pricing.cost(Usage(input_tokens=1_000_000, output_tokens=0)) == 0.15
    policies = suite.tools.policies()
    assert policies.default is ToolPolicy.RECORDED
    assert policies.stubs == {"get_time": "12:00"} and policies.faults == {"search": "timeout"}
    assert (suite.judge, suite.trials, suite.concurrency) == ("gpt-4o-mini", 2, None)


def test_cases_turns_context_and_flags(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather")
    two = suite.case("oslo-then-paris")
    assert two.turns == ["Weather in Oslo?", "And Paris?"]
    context = two.run_context()
    assert (context.session, context.request) == ({"user": "Ada"}, {"locale": "fr"})
    assert suite.case("paris").run_context().session == {"user": "Ada"}
    atlantis = suite.case("atlantis")
    assert atlantis.turns == [[{"role": "user", "content": "Weather in Atlantis?"}]]
    assert (atlantis.xfail, atlantis.skip) == ("expected to fail", "not recorded yet")
    assert suite.trials_for(atlantis) == 5 and suite.trials_for(two) == 2
    assert [s.params for s in atlantis.expect] == [["completed", "business_stop"], None]


def test_case_expectations_replace_suite_defaults_of_the_same_scorer(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather")
    names = [spec.name for spec in suite.expectations_for(suite.case("paris"))]
    assert names == ["stop_reason", "max_steps", "tool_called", "output_contains"]
    atlantis = suite.expectations_for(suite.case("atlantis"))
    assert [(s.name, s.params) for s in atlantis] == [
        ("max_steps", 6),
        ("stop_reason", ["completed", "business_stop"]),
        ("stop_reason", None),
    ]


def test_cassettes_default_to_replays_in_the_repository_root(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather")
    assert suite.root == repo.resolve()
    assert suite.cassette_dir == repo.resolve() / "replays" / "weather"
    assert suite.cassette_for(suite.case("paris")) == suite.cassette_dir / "paris.yaml"
    atlantis = suite.cassette_for(suite.case("atlantis"))
    assert atlantis == suite.cassette_dir / "shared" / "atlantis.yaml"

    (repo / "golden" / "weather" / "suite.yaml").write_text(SUITE + "cassettes: recorded\n")
    moved = load_suite(repo / "golden" / "weather")
    assert moved.cassette_dir == (repo / "golden" / "weather" / "recorded").resolve()


def test_expectations_build_scorers(repo: Path) -> None:
    suite = load_suite(repo / "golden" / "weather")
    scorers = [
        spec.build(base_dir=suite.root) for spec in suite.expectations_for(suite.case("paris"))
    ]
    assert [s.name for s in scorers] == [
        "stop_reason",
        "max_steps",
        "tool_called",
        "output_contains",
    ]


def test_objects_are_imported_only_when_asked(repo: Path) -> None:
    folder = repo / "golden" / "weather"
    (folder / "agent.py").write_text("agent = 'the agent'\n")
    (folder / "suite.yaml").write_text(
        SUITE.replace("golden.weather.agent:agent", "agent.py:agent")
    )
    suite = load_suite(folder)  # no import happens here: the file could be broken
    assert suite.load_object(suite.agent) == "the agent"


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    return [str(p).removeprefix(f"{path}/") for p in caught.value.problems]


def test_every_problem_is_reported_with_file_line_and_field(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "golden" / "broken",
        {
            "suite.yaml": """\
                agent: not a reference
                trials: 0
                scorers:
                  - stop_reson: completed
                  - tool_called:
                      name: x
                    times: 2
                cases:
                  - id: a b
                    input: hi
                    expect:
                      - trajectory:
                          expected:
                            - {tool: a, handoff: b}
                          mode: strikt
                      - tool_called:
                          name: get_weather
                          args: [Paris]
                  - id: both
                    input: hi
                    inputs: [a]
                    bogus: 1
                  - id: twice
                    input: hi
                    input: again
                """,
        },
    )
    assert problems_of(folder) == [
        "suite.yaml:1:1: agent: expected 'module:attribute' (e.g. 'golden.weather.agent:agent') "
        "or 'path/to/file.py:attribute'; got 'not a reference'",
        "suite.yaml:2:1: trials: expected greater than or equal to 1; got 0",
        "suite.yaml:4:5: scorers[0].stop_reson: unknown scorer 'stop_reson'; expected one of: "
        "stop_reason, tool_result, output_regex, output_json_schema, max_steps, output_contains, "
        "cost_budget, tool_called, custom, token_budget, output_number, output_not_contains, "
        "tool_not_called, trajectory, model_shown, latency_budget, model_not_shown, llm_judge, "
        "output_equals, fallback",
        "suite.yaml:5:5: scorers[1]: an expectation has one scorer name as its only key; got "
        "tool_called, times (indent the parameters under the scorer name)",
        "suite.yaml:9:5: cases[0].id: a case id may use only letters, digits, '_', '.' and '-'; "
        "got 'a b'",
        "suite.yaml:14:15: cases[0].expect[0].trajectory.expected[0]: a step is either "
        "{tool: name, ...} or {handoff: agent}, not both",
        "suite.yaml:15:11: cases[0].expect[0].trajectory.mode: expected 'strict', 'unordered', "
        "'subset' or 'superset'; got 'strikt' (did you mean 'strict'?)",
        "suite.yaml:18:11: cases[0].expect[1].tool_called.args: expected a mapping; got ['Paris']",
        "suite.yaml:19:5: cases[1]: give either input (one user turn) or inputs (a list of user "
        "turns), not both",
        "suite.yaml:22:5: cases[1].bogus: unknown field 'bogus'; expected one of: tags, tools, "
        "inputs, skip, input, serve, trials, context, cassette, description, expect, id, xfail",
        "suite.yaml:25:5: cases[2].input: duplicate key 'input' (first written at line 24); the "
        "later value would silently replace the earlier one",
    ]


def test_a_mapping_key_of_the_wrong_kind_says_what_it_takes_not_a_class_name(
    tmp_path: Path,
) -> None:
    folder = write(
        tmp_path / "golden" / "kinds",
        {
            "suite.yaml": """\
                agent: a.b:c
                serve: 3
                cases:
                  - id: a
                    input: hi
                    serve: [llama_cpp]
                    expect:
                      - output_json_schema: object
                      - fallback: backup
                """,
        },
    )
    assert problems_of(folder) == [
        "suite.yaml:2:1: serve: expected true or false, or a mapping {quirks, faults}; got 3",
        "suite.yaml:6:5: cases[0].serve: expected true or false, or a mapping {quirks, faults}; "
        "got ['llama_cpp']",
        "suite.yaml:8:9: cases[0].expect[0].output_json_schema: expected a mapping {schema}; "
        "got 'object'",
    ]


def test_duplicate_case_ids_name_both_places(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "golden" / "dups",
        {
            "suite.yaml": "agent: a:b\ncases:\n  - id: same\n    input: hi\n",
            "cases/more.yaml": "- id: other\n  input: x\n- id: same\n  input: y\n",
        },
    )
    assert problems_of(folder) == [
        f"cases/more.yaml:3:3: [1].id: duplicate case id 'same'; first defined at "
        f"{folder / 'suite.yaml'}:3"
    ]


def test_malformed_files_report_the_parsers_position(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "golden" / "bad",
        {
            "suite.yaml": "agent: a:b\n",
            "cases/broken.yaml": "- id: c\n  input: [unclosed\n",
            "cases/not_cases.yaml": "just text\n",
            "cases/rows.jsonl": '{"id": "ok", "input": "hi"}\n{"id": "j", input: "x"}\n[1]\n'
            '{"id": "r", "input": "x", "expect": [{"output_regex": "("}]}\n{"input": "x"}\n',
        },
    )
    assert problems_of(folder) == [
        "cases/broken.yaml:3:1: not valid YAML: while parsing a flow sequence, expected ',' or "
        "']', but got '<stream end>'",
        "cases/not_cases.yaml:1:1: expected a case (a mapping with id), a list of cases, or "
        "{cases: [...]}; got 'just text'",
        "cases/rows.jsonl:2:13: not valid JSON: Expecting property name enclosed in double quotes",
        "cases/rows.jsonl:3: expected a JSON object (one case); got a list",
        "cases/rows.jsonl:4: expect[0].output_regex.pattern: not a valid regular expression: "
        "missing ), unterminated subpattern at position 0",
        "cases/rows.jsonl:5: id: missing required field 'id'",
    ]


def test_a_suite_file_must_be_a_mapping(tmp_path: Path) -> None:
    folder = write(tmp_path / "golden" / "empty", {"suite.yaml": "# nothing yet\n"})
    assert problems_of(folder) == [
        "suite.yaml: expected a mapping with at least agent: module:attribute; got nothing "
        "(an empty document)"
    ]


def test_discover_keeps_going_past_bad_suites(repo: Path) -> None:
    write(repo / "golden" / "broken", {"suite.yaml": "agent: 3\n"})
    write(repo / "golden" / "nested" / "deeper", {"suite.yaml": "agent: a:b\nname: weather\n"})
    write(repo / "golden" / ".hidden", {"suite.yaml": "agent: [\n"})
    found = discover([repo / "golden", repo / "missing", repo / "examples"])
    assert [suite.name for suite in found.suites] == ["weather"]
    messages = [str(error).splitlines() for error in found.errors]
    assert messages[0][1].endswith(
        "suite.yaml:1:1: agent: expected a valid string or a mapping {command, timeout, env, "
        "cwd, name}; got 3"
    )
    assert "suite name 'weather' is already used by" in messages[1][1]
    assert messages[2][1] == f"  {repo / 'missing'}: no such file or folder"
    assert messages[3][1] == f"  {repo / 'examples'}: no such file or folder"
    assert not found.ok


def test_discover_finds_a_suite_given_directly(repo: Path) -> None:
    found = discover([repo / "golden" / "weather" / "suite.yaml"])
    assert found.ok and [s.name for s in found.suites] == ["weather"]
    (repo / "empty").mkdir()
    nothing = discover([repo / "empty"])
    assert str(nothing.errors[0].problems[0]).endswith(
        "no suite.yaml found in this folder or below"
    )


def test_cases_can_be_built_in_python_and_are_validated() -> None:
    case = Case(id="x", input="hi", expect=[{"output_contains": "Paris"}, "stop_reason"])
    assert [spec.name for spec in case.expect] == ["output_contains", "stop_reason"]
    with pytest.raises(ValidationError, match=r"tool_called\.args: expected a mapping"):
        Case(id="x", input="hi", expect=[{"tool_called": {"name": "a", "args": [1]}}])
    with pytest.raises(ValidationError, match="give input"):
        Case(id="x")
    with pytest.raises(ValidationError, match="expected a chat message"):
        Case(id="x", input=[{"content": "no role"}])


def test_tool_policies_and_model_settings_are_checked_where_written(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "golden" / "settings",
        {
            "suite.yaml": """\
                agent: a:b
                tools:
                  default: recordd
                  overrides: {search: "fault:boom", clock: "stubb:1"}
                model:
                  settings: {temprature: 0}
                cases:
                  - id: c
                    input: hi
                    context:
                """,
        },
    )
    assert problems_of(folder) == [
        "suite.yaml:3:3: tools.default: expected 'live', 'recorded', 'stub' or 'fault'; got "
        "'recordd' (did you mean 'recorded'?)",
        "suite.yaml:4:15: tools.overrides.search: expected fault, fault:error, fault:timeout, "
        "fault:jsonrpc, fault:crash or fault:slow:SECONDS; got 'fault:boom'",
        "suite.yaml:4:37: tools.overrides.clock: tool policy 'stubb' is not one of: live, "
        "recorded, stub, fault",
        "suite.yaml:6:14: model.settings.temprature: unknown field 'temprature'; expected one "
        "of: temperature, stream, extra_body, seed, stop, parallel_tool_calls, top_p, "
        "max_tokens, output_mode, tool_choice, model",
    ]


@pytest.fixture
def isolated_plugins() -> Iterator[None]:
    """Plugins a test imports, the scorers they register and sys.path entries do not leak."""
    path, modules, scorers = list(sys.path), set(sys.modules), dict(SCORERS)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    SCORERS.clear()
    SCORERS.update(scorers)


PLUGIN = """\
from agentbench.evals import ScoreContext, scorer


@scorer
def names_city(ctx: ScoreContext, city: str) -> bool:
    \"\"\"The final answer names the city.\"\"\"
    return city in str(ctx.output)
"""

PLUGIN_SUITE = """\
agent: agent.py:agent
plugins:
  - {module}
  - local_checks.py
scorers:
  - short_answer
cases:
  - id: paris
    input: How warm is Paris?
    expect:
      - names_city: {{city: Paris}}
"""


def test_plugins_register_scorers_before_expectations_are_checked(
    tmp_path: Path, isolated_plugins: None
) -> None:
    # A package in the repository root, and a file beside suite.yaml.
    write(tmp_path / "plugcheck_a", {"__init__.py": "", "scorers.py": PLUGIN})
    folder = write(
        tmp_path / "golden" / "weather",
        {
            "suite.yaml": PLUGIN_SUITE.format(module="plugcheck_a.scorers"),
            "local_checks.py": "from agentbench.evals import scorer\n\n\n@scorer\n"
            "def short_answer(ctx):\n    return len(str(ctx.output)) < 80\n",
            "cases/more.yaml": "- id: oslo\n  input: Oslo?\n"
            "  expect: [{names_city: {city: Oslo}}]\n",
        },
    )
    suite = load_suite(folder)
    assert suite.plugins == ["plugcheck_a.scorers", "local_checks.py"]
    specs = suite.expectations_for(suite.case("paris"))
    assert [(s.name, s.params, s.line) for s in specs] == [
        ("short_answer", None, 6),
        ("names_city", {"city": "Paris"}, 11),
    ]
    built = [spec.build(base_dir=suite.root) for spec in specs]
    assert [b.name for b in built] == ["short_answer", "names_city"]
    assert SCORERS["names_city"].source == "plugcheck_a.scorers:names_city"
    # A case file's expectation is checked against the plugin's params model too.
    (folder / "cases" / "more.yaml").write_text(
        "- id: oslo\n  input: Oslo?\n  expect:\n    - names_city: {town: Oslo}\n"
    )
    assert problems_of(folder) == [
        "cases/more.yaml:4:7: [0].expect[0].names_city.city: missing required field 'city'",
        "cases/more.yaml:4:20: [0].expect[0].names_city.town: unknown field 'town'; expected "
        "one of: city",
    ]


def test_a_plugin_that_fails_to_import_is_a_problem_at_its_entry(
    tmp_path: Path, isolated_plugins: None
) -> None:
    write(
        tmp_path / "plugcheck_b", {"__init__.py": "", "scorers.py": "raise RuntimeError('boom')\n"}
    )
    folder = write(
        tmp_path / "golden" / "x",
        {
            "suite.yaml": """\
                agent: a:b
                description: >
                  Plugins that cannot work,
                  each reported where it is written.
                scorers: [stop_reason]
                plugins:
                  - plugcheck_b.scorers
                  - plugcheck_nowhere.scorers
                  - missing.py
                  - bad_syntax.py
                  - plugcheck_b.scorers:polite
                cases:
                  - id: c
                    input: hi
                    expect: [polite, stop_reson]
                """,
            "bad_syntax.py": "def broken(:\n",
        },
    )
    problems = problems_of(folder)
    assert problems[0] == (
        "suite.yaml:7:5: plugins[0]: importing 'plugcheck_b.scorers' raised RuntimeError: boom"
    )
    assert problems[1] == (
        "suite.yaml:8:5: plugins[1]: cannot import 'plugcheck_nowhere.scorers': No module named "
        f"'plugcheck_nowhere' (modules are imported from the repository root, {tmp_path})"
    )
    assert problems[2] == (
        f"suite.yaml:9:5: plugins[2]: no such file {folder.resolve() / 'missing.py'} (a plugin "
        "file is relative to the suite folder)"
    )
    assert problems[3].startswith(
        "suite.yaml:10:5: plugins[3]: importing 'bad_syntax.py' raised SyntaxError:"
    )
    assert problems[4] == (
        "suite.yaml:11:5: plugins[4]: expected a module (e.g. 'checks.scorers') or a file "
        "('path/to/file.py'); got 'plugcheck_b.scorers:polite' (a plugin is a whole module: "
        "write 'plugcheck_b.scorers')"
    )
    # The scorer a broken plugin would have registered is blamed on the plugins; a typo of a
    # built-in name is still told as a typo.
    assert problems[5] == (
        "suite.yaml:15:14: cases[0].expect[0]: unknown scorer 'polite'; plugins[0] "
        "('plugcheck_b.scorers'), plugins[1] ('plugcheck_nowhere.scorers'), plugins[2] "
        "('missing.py'), plugins[3] ('bad_syntax.py') failed to import, so the scorers they "
        "register are unknown"
    )
    assert problems[6].startswith(
        "suite.yaml:15:22: cases[0].expect[1]: unknown scorer 'stop_reson'; expected one of: "
        "stop_reason, "
    )
    assert len(problems) == 7
    # A module that raised is not left half-imported: loaded again, it fails again; fixed, it
    # loads.
    assert problems_of(folder) == problems
    (tmp_path / "plugcheck_b" / "scorers.py").write_text(PLUGIN)
    (folder / "suite.yaml").write_text(
        "agent: a:b\nplugins: [plugcheck_b.scorers]\ncases:\n  - id: c\n    input: hi\n"
        "    expect: [{names_city: Paris}]\n"
    )
    assert load_suite(folder).plugins == ["plugcheck_b.scorers"]


def test_an_unknown_scorer_says_how_to_register_one(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "golden" / "unknown",
        {"suite.yaml": "agent: a:b\nscorers:\n  - politeness: {min: 1}\n"},
    )
    [problem] = problems_of(folder)
    assert problem.startswith("suite.yaml:3:5: scorers[0].politeness: unknown scorer 'politeness'")
    assert problem.endswith(
        "a @scorer function is known by its name once its module is imported: list the module "
        "under plugins: in suite.yaml (e.g. plugins: [checks.scorers])"
    )


def test_a_custom_scorer_that_does_not_import_names_its_expectation(
    tmp_path: Path, isolated_plugins: None
) -> None:
    folder = write(
        tmp_path / "golden" / "custom",
        {
            "suite.yaml": "agent: a:b\n",
            "cases/c.yaml": """\
                - id: c
                  input: hi
                  expect:
                    - stop_reason
                    - custom: {function: "plugcheck_gone.checks:polite"}
                """,
        },
    )
    suite = load_suite(folder)  # nothing is imported yet: the reference is well formed
    spec = suite.expectations_for(suite.case("c"))[-1]
    with pytest.raises(ExpectationError) as caught:
        spec.build(base_dir=suite.root)
    assert str(caught.value) == (
        f"{folder / 'cases' / 'c.yaml'}:5:7: [0].expect[1].custom.function: custom scorer "
        "'plugcheck_gone.checks:polite': cannot import 'plugcheck_gone.checks': No module named "
        "'plugcheck_gone'"
    )
    assert caught.value.field == "function" and caught.value.scorer == "custom"


def test_a_command_agent_without_a_program_is_told_what_to_write(tmp_path: Path) -> None:
    for number, command in enumerate(("[]", '[""]')):
        suite = f"agent: {{command: {command}}}\n"
        folder = write(tmp_path / f"suite{number}", {"suite.yaml": suite})
        assert problems_of(folder) == [
            "suite.yaml:1:9: agent.command: needs the program to run and its arguments, "
            "e.g. [node, agent.mjs]"
        ]
