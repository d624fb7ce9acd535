"""`--shard K/N`: a deterministic, balanced part of an eval's trials, for a CI job matrix.

Every trial (suite, case, trial number) gets a place on a ring from a hash of its name, so
where it lands does not depend on which other cases exist or on the order they are listed.
The ring is cut into N arcs of equal weight, a trial weighing the model calls its cassette
recorded (a case that replays 40 calls costs about 40 times one that replays one). Adding a
case moves only that case and, at most, one trial next to each of the N-1 cuts; every job of
the matrix computes the same cuts from the same files, with no coordination.

The N jobs of one run share an eval id (`--eval-id`, or one derived from the CI run and the
code version), so `agentbench merge` puts their results back together as one eval.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agentbench.errors import UsageError
from agentbench.yaml_source import SourceError, max_file_bytes, read_bytes

T = TypeVar("T")
_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
# A cassette's interactions: one `- request:` per recorded model call (YAML), or a
# `"request":` key (JSON). Counted in the text: parsing every cassette to plan would cost
# more than the shard saves.
_YAML_CALL = re.compile(rb"^- request:", re.MULTILINE)
_JSON_CALL = re.compile(rb'"request"\s*:')
# Where CI systems put the id of the run a job belongs to: the jobs of one matrix share it.
_CI_RUN_IDS = ("GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID", "CIRCLE_WORKFLOW_ID")


@dataclass(frozen=True)
class Shard:
    """Part `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        found = _SHARD.match(text)
        if found is None:
            raise UsageError(f"--shard {text!r}: expected K/N, such as 2/8 (part 2 of 8)")
        index, count = int(found[1]), int(found[2])
        if count < 1 or not 1 <= index <= count:
            raise UsageError(f"--shard {text}: K must be between 1 and N (N at least 1)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def pick(
        self, items: Sequence[T], name: Callable[[T], str], weight: Callable[[T], int]
    ) -> list[T]:
        """The items of this shard, in their given order."""
        parts = assign([name(item) for item in items], [weight(item) for item in items], self.count)
        return [item for item, part in zip(items, parts, strict=True) if part == self.index]


@dataclass(frozen=True)
class ShardSet:
    """The shards an eval holds (`K/N` each, from `run --shard`), and what that leaves out.

    An eval run without `--shard` holds none and is whole. One that holds shards is whole
    when it holds every part of one split (1/N … N/N, merged with `agentbench merge`); else it
    is partial, and `problems` says why in sentences naming the shards."""

    present: tuple[str, ...] = ()

    @classmethod
    def of(cls, shards: Sequence[Any] | None) -> ShardSet:
        return cls(tuple(sorted({str(s) for s in shards or ()}, key=_shard_order)))

    @property
    def counts(self) -> list[int]:
        """The N of each split the shards come from (one, unless shards of two splits met)."""
        return sorted({int(s.split("/")[1]) for s in self.present if "/" in s})

    @property
    def missing(self) -> list[str]:
        """The parts of the (one) split this eval lacks."""
        counts = self.counts
        if len(counts) != 1:
            return []
        parts = (f"{k}/{counts[0]}" for k in range(1, counts[0] + 1))
        return [part for part in parts if part not in self.present]

    @property
    def partial(self) -> bool:
        return bool(self.problems())

    def problems(self) -> list[str]:
        """Why the eval is not whole, or nothing."""
        if len(self.counts) > 1:
            return [
                f"it holds shards of different splits ({', '.join(self.present)}): each CI run "
                "of a job matrix must use one --shard K/N count and its own eval id"
            ]
        missing = self.missing
        if not missing:
            return []
        return [
            f"it lacks shard(s) {', '.join(missing)} (it holds {', '.join(self.present)}): "
            "merge every shard's store with `agentbench merge` before gating"
        ]


def _shard_order(text: str) -> tuple[int, int, str]:
    index, _, count = text.partition("/")
    numbers = (int(count), int(index)) if index.isdigit() and count.isdigit() else (0, 0)
    return (*numbers, text)


def ring_position(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def assign(names: Sequence[str], weights: Sequence[int], count: int) -> list[int]:
    """The shard (1-based) of each item: the ring cut into `count` arcs of equal weight."""
    order = sorted(range(len(names)), key=lambda i: (ring_position(names[i]), names[i]))
    total = sum(max(1, w) for w in weights) or 1
    parts = [0] * len(names)
    before = 0
    for i in order:
        own = max(1, weights[i])
        # The shard holding the middle of this item's weight: each arc ends up within one
        # item's weight of total / count.
        middle = before + own / 2
        parts[i] = min(count, int(middle * count // total) + 1)
        before += own
    return parts


def recorded_calls(cassette: Path) -> int:
    """How many model calls a cassette recorded (1 for a missing or unreadable one, one that
    is no regular file — a named pipe would block the plan forever — or over the size limit:
    the case reports it when it runs)."""
    try:
        data = read_bytes(cassette, max_file_bytes(), lambda size, limit: "over the limit")
    except SourceError:
        return 1
    pattern = _JSON_CALL if cassette.suffix == ".json" else _YAML_CALL
    return max(1, len(pattern.findall(data)))


def trial_name(suite: Any, case: Any, trial: int) -> str:
    return f"{suite.name}/{case.id}/{trial}"


def shared_eval_id(code_version: str | None, shard: Shard, suites: Sequence[Any]) -> str:
    """The eval id every job of one sharded CI run derives alike: from the CI system's run
    id (and attempt) when there is one, the code version, the shard count and the suites."""
    ci_run = next((os.environ[k] for k in _CI_RUN_IDS if os.environ.get(k)), "")
    attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "")
    key = "|".join(
        [ci_run, attempt, code_version or "", str(shard.count), *sorted(s.name for s in suites)]
    )
    return f"eval_shards{shard.count}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
