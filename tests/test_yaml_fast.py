"""The fast YAML paths read exactly what the full ones do, and hand back everything else.

`yaml_fast.load_plain` builds cassettes from libyaml's events, and `load_yaml` composes suite
files with libyaml: both must give the data (and, for suites, the positions and duplicate
keys) that the slow paths give, and leave every document they do not handle — and every
error — to the slow path, so messages stay as they were.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from vcr.serializers import yamlserializer

import agentbench.yaml_source as yaml_source
from agentbench.replay.cassette import Cassette
from agentbench.yaml_fast import NotPlainError, fast_path_for, load_plain
from agentbench.yaml_source import MAX_DEPTH, YamlDocument, YamlSyntaxError, load_yaml

ROOT = Path(__file__).resolve().parent.parent
LOADER = yamlserializer._CassetteLoader

PLAIN = [
    "a: 1\nb: two\nc: 3.5\nd: true\ne: ~\nf: null\ng: ''\nh:\n",
    "- 0x1f\n- 0o17\n- 1_000\n- 1:30\n- .inf\n- -.nan\n- yes\n- off\n- '1'\n- \"2\"\n",
    "when: 2026-06-30\nat: 2026-06-30 12:00:00+02:00\n",
    "x: {a: [1, 2, {b: c}], 'd e': \"f\\ng\"}\n",
    "dup: 1\ndup: 2\n",
    "1: int key\n2.5: float key\ntrue: bool key\n~: null key\n",
    "text: |\n  line one\n  line two\nfolded: >\n  one\n  two\n",
    "# only a comment\n",
    "--- \nsingle: document\n...\n",
    'unicode: "caf\\u00e9 \\U0001F600"\nraw: café ✓\n',
    "nested:\n" + "".join("  " * i + f"- l{i}:\n" for i in range(1, 20)) + "  " * 20 + "- end\n",
]
NOT_PLAIN = [
    "a: &x 1\nb: *x\n",
    "base: &b {k: 1}\nthis:\n  <<: *b\n  j: 2\n",
    "t: !!python/tuple [1, 2]\n",
    "s: !!str 12\n",
    "blob: !!binary aGVsbG8=\n",
    "? [a, b]\n: c\n",
    "a: 1\n---\nb: 2\n",
    "a: [1, 2\n",
    "a: b: c\n",
    "= : value\n",
    "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n",
]


def test_the_fast_path_is_used_here() -> None:
    # libyaml is installed in this environment; without it these tests would test nothing.
    assert yaml.__with_libyaml__
    assert fast_path_for(LOADER)
    assert not fast_path_for(yaml.SafeLoader)
    assert not fast_path_for(None)


@pytest.mark.parametrize("text", PLAIN)
def test_plain_documents_load_as_the_cassette_loader_loads_them(text: str) -> None:
    expected = yaml.load(text, Loader=LOADER)
    got = load_plain(text, LOADER, MAX_DEPTH)
    assert got == expected
    assert repr(got) == repr(expected)  # types too: 1 vs 1.0 vs True, str vs bytes


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_anything_else_is_handed_back(text: str) -> None:
    with pytest.raises(NotPlainError):
        load_plain(text, LOADER, MAX_DEPTH)


def test_the_depth_bound_counts_collections_as_the_bounds_walk_does() -> None:
    at_bound = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert yaml_source.check_yaml_bounds(at_bound)
    assert load_plain(at_bound, LOADER, MAX_DEPTH) == yaml.load(at_bound, Loader=LOADER)


def test_every_shipped_cassette_reads_as_before() -> None:
    files = sorted((ROOT / "replays").rglob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert load_plain(text, LOADER, MAX_DEPTH) == yamlserializer.deserialize(text), path
        cassette = Cassette.load(path)
        assert cassette.interactions and cassette.metadata


def test_a_cassette_that_is_not_plain_still_loads(tmp_path: Path) -> None:
    shipped = sorted((ROOT / "replays").rglob("*.yaml"))[0]
    data = yamlserializer.deserialize(shipped.read_text(encoding="utf-8"))
    # Aliases and anchors: valid YAML vcrpy reads, which only the full path builds.
    text = yaml.dump({**data, "metadata": {**data["metadata"], "extra": [data["version"]] * 2}})
    anchored = text.replace("extra:\n  - 1\n  - 1", "extra:\n  - &v 1\n  - *v")
    assert "*v" in anchored
    target = tmp_path / "anchored.yaml"
    target.write_text(anchored, encoding="utf-8")
    with pytest.raises(NotPlainError):
        load_plain(anchored, LOADER, MAX_DEPTH)
    loaded = Cassette.load(target)
    assert loaded.metadata["extra"] == [1, 1]
    assert [i.request for i in loaded.interactions] == [
        i.request for i in Cassette.load(shipped).interactions
    ]


def _slow_load(text: str, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as patch:
        patch.setattr(yaml_source, "_FAST_LOADER", yaml.SafeLoader)
        try:
            return load_yaml(text)
        except YamlSyntaxError as exc:
            return ("error", exc.message, exc.position)


def _fast_load(text: str) -> object:
    try:
        return load_yaml(text)
    except YamlSyntaxError as exc:
        return ("error", exc.message, exc.position)


SUITE_TEXTS = [
    *PLAIN,
    *NOT_PLAIN,
    '- id: a\n  input: café ✓ ünïcode\n  expect:\n    - output_contains: "ü"\n',
    "- id: a\n  id: b\n",
    "defaults: &d {tags: [x]}\ncase:\n  <<: *d\n  id: c\n",
    "a: \x07bell\n",
    "a:\tb\n",
    "tags: [lookup?]\nm: {value?: 40}\nq: [\"why?\", 'how?']\n",
    "- id: x\n  input: What is up?\n  tags: [a, b]\n",
    "d: >#comment\n  text\n",
    "a: 1\r\nb: [c]\r\n",
    "a: caf\ufeffé\nb: {c: d}\n",
    "a: x\u2028y\n",
    "a: &x [1, *x]\n",
    "a: &x {b: [*x]}\n",
    "q: &q what?\nl: [*q]\n",
    "key: 'unterminated\n",
    "- a\n - b\n",
    "%YAML 1.2\n---\na: 1\n",
    "a: 12345678901234567890123456789\nb: 2026-13-45\n",
]


@pytest.mark.parametrize("text", SUITE_TEXTS)
def test_suite_files_read_as_pyyaml_reads_them(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _fast_load(text) == _slow_load(text, monkeypatch)


def test_shipped_suite_files_read_as_pyyaml_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted((ROOT / "golden").rglob("*.yaml")) + sorted((ROOT / "examples").rglob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert _fast_load(text) == _slow_load(text, monkeypatch), path


def _walk_view(document: YamlDocument) -> object:
    return (repr(document.data), document.positions, document.duplicates)


def _random_data(rng: random.Random, depth: int = 0) -> object:
    texts = ["a", "b c", "x: y", "why?", "#no", "- z", "'q'", '"d"', "é", "~", "yes", "1:30", "<<"]
    if depth > 3 or rng.random() < 0.3:
        return rng.choice([*texts, 1, -2, 1.5, True, None, "2026-06-30", ""])
    if rng.random() < 0.5:
        return {rng.choice(texts): _random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_random_data(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def test_one_walk_of_the_events_builds_what_the_composed_tree_does() -> None:
    # `_load_walk` (suite files in one pass) gives `_load_fast`'s document — data, positions,
    # duplicate keys — or hands the text on; it never takes a text the bounds refuse.
    rng = random.Random(15)
    texts = [*SUITE_TEXTS, "a: 1\na: 2\nb:\n  c: [1, {d: 2, d: 3}]\n", "- - 1\n  - 2\n- 3\n"]
    texts += [
        yaml.dump(_random_data(rng), default_flow_style=rng.choice([None, True, False]))
        for _ in range(300)
    ]
    walked = 0
    for text in texts:
        found = yaml_source._load_walk(text)
        if found is None:
            continue
        walked += 1
        assert yaml_source.check_yaml_bounds(text), text
        composed = yaml_source._load_fast(text)
        if composed is None:  # no document at all: both paths give an empty one
            assert found.data is None and not found.positions, text
        else:
            assert _walk_view(found) == _walk_view(composed), text
    assert walked > 250
    for text in ("a: &x 1\nb: *x\n", "base: &b {k: 1}\nthis:\n  <<: *b\n", "m: {value?: 1}\n"):
        assert yaml_source._load_walk(text) is None
