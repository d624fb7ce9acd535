"""Parsed cassettes are kept by content: the same text parses once, an edit is a new entry,
and what comes from the cache is exactly what parsing gives."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentbench.replay import cassette_cache
from agentbench.replay.cassette import Cassette, CassetteError, Interaction
from agentbench.runtime.models import ChatResponse

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}]}


def saved(path: Path, text: str = "Sunny.") -> Path:
    response = ChatResponse(text=text, finish_reason="stop")
    return Cassette([Interaction.of(REQUEST, response)]).save(path)


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "cassettes").rglob("*.json"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(cassette_cache.CACHE_ENV, str(folder))
    return folder


def test_a_cassette_is_parsed_once_and_the_cache_gives_the_same_data(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = saved(tmp_path / "c.yaml")
    first = Cassette.load(path)
    assert len(entries(cache)) == 1
    parses: list[str] = []
    original = cassette_cache.parsed

    def counting(text, parse):
        return original(text, lambda t: parses.append(t) or parse(t))

    monkeypatch.setattr(cassette_cache, "parsed", counting)
    second = Cassette.load(path)
    assert parses == []  # served from the cache
    assert second.interactions[0].request == first.interactions[0].request
    assert second.interactions[0].response().text == "Sunny."
    assert second.metadata == first.metadata

    saved(path, "Rain.")  # an edit is other text: parsed anew, a second entry
    assert Cassette.load(path).interactions[0].response().text == "Rain."
    assert len(parses) == 1 and len(entries(cache)) == 2


def test_data_json_would_change_is_not_cached(tmp_path: Path, cache: Path) -> None:
    # An unquoted YAML timestamp parses to a datetime, which JSON would turn into text.
    path = saved(tmp_path / "c.yaml")
    path.write_text(path.read_text() + "recorded: 2026-12-01 10:00:00\n")
    Cassette.load(path)
    assert entries(cache) == []


def test_a_broken_entry_is_parsed_again_and_an_unusable_cache_is_skipped(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = saved(tmp_path / "c.yaml")
    Cassette.load(path)
    (entry,) = entries(cache)
    entry.write_bytes(b'{"half": ')  # a crash mid-write, or a disk gone bad
    assert Cassette.load(path).interactions[0].response().text == "Sunny."
    assert entry.read_bytes().startswith(b'{"interactions"')  # parsed again, and kept whole
    blocked = tmp_path / "a-file"  # a cache folder that cannot be made (even by root)
    blocked.write_text("")
    monkeypatch.setenv(cassette_cache.CACHE_ENV, str(blocked))
    saved(path, "Hail.")
    assert Cassette.load(path).interactions[0].response().text == "Hail."


def test_a_broken_cassette_is_still_named_and_the_cache_can_be_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cassette_cache.CACHE_ENV, "off")
    assert cassette_cache.cache_dir() is None
    path = tmp_path / "bad.yaml"
    path.write_text("interactions: [\n")
    with pytest.raises(CassetteError, match=r"bad\.yaml:\d+:\d+: the file is not valid YAML"):
        Cassette.load(path)


@pytest.mark.parametrize(
    "value", ["2026-12-01 10:00:00", ".nan", "-.Inf", "!!binary aGk=", "!!set {a}"]
)
def test_values_json_would_not_keep_exactly_are_never_cached(
    tmp_path: Path, cache: Path, value: str
) -> None:
    path = saved(tmp_path / "c.yaml")
    path.write_text(path.read_text() + f"extra: {value}\n")
    Cassette.load(path)
    assert entries(cache) == []


def test_a_first_run_has_its_cassettes_parsed_ahead_by_a_second_process(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [saved(tmp_path / f"c{i}.yaml", f"Answer {i}.") for i in range(3)]
    monkeypatch.setattr(cassette_cache, "PREFETCH_MIN", 2)
    monkeypatch.setattr(cassette_cache, "_cores", lambda: 2)
    started: list[object] = []
    original = cassette_cache.subprocess.Popen

    def popen(*args: object, **kwargs: object) -> object:
        started.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(cassette_cache.subprocess, "Popen", popen)
    with cassette_cache.prefetching(paths):
        for _ in range(600):  # the second process parses them into the cache meanwhile
            if len(entries(cache)) == 3:
                break
            time.sleep(0.05)
    assert len(started) == 1 and len(entries(cache)) == 3
    parses: list[str] = []
    parsed = cassette_cache.parsed
    monkeypatch.setattr(
        cassette_cache, "parsed", lambda text, parse: parsed(text, lambda t: parses.append(t))
    )
    assert [Cassette.load(p).interactions[0].response().text for p in paths] == [
        f"Answer {i}." for i in range(3)
    ]
    assert parses == []  # every one from the cache: the same data parsing gives
    assert not list(cache.rglob("*.tmp"))
    with cassette_cache.prefetching(paths):  # cached now: no second process
        pass
    assert len(started) == 1


def test_prefetching_is_skipped_when_it_cannot_pay(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [saved(tmp_path / f"c{i}.yaml") for i in range(3)]

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("no second process expected")

    monkeypatch.setattr(cassette_cache.subprocess, "Popen", refuse)
    with cassette_cache.prefetching(paths):  # fewer than PREFETCH_MIN cassettes
        pass
    monkeypatch.setattr(cassette_cache, "PREFETCH_MIN", 2)
    monkeypatch.setattr(cassette_cache, "_cores", lambda: 1)
    with cassette_cache.prefetching(paths):  # one core: it would only compete with the run
        pass
    monkeypatch.setattr(cassette_cache, "_cores", lambda: 2)
    monkeypatch.setenv(cassette_cache.CACHE_ENV, "off")
    with cassette_cache.prefetching(paths):  # no cache to fill
        pass
