"""The spans of an import checked as the trees they claim to be, before they are grouped.

Within a trace, a span id names one span, and following parents must end (at a root, or at
a parent not in the files): a span that is its own parent, or parents that lead round in a
circle, would send the grouping round forever, and two different spans under one id would
make its tree a guess. Each is an `OtlpFileError` naming the spans and where they are. The
same span exported twice (an exporter's retry lands twice in a collector's file; two files
overlap) is not a conflict: it is read once.
"""

from __future__ import annotations

import dataclasses

from agentbench.otel.otlp_json import OtlpFileError, Span

_SHOWN_IN_A_CYCLE = 6


def checked(spans: list[Span]) -> list[Span]:
    """The spans, each once; OtlpFileError for a reused span id or a cycle of parents."""
    unique: dict[tuple[str, str], Span] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        first = unique.get(key)
        if first is None:
            unique[key] = span
        elif not _same(first, span):
            raise OtlpFileError(
                f"{span.where}: span id {span.span_id} of trace {span.trace_id} is also the id "
                f"of another span, {first.where}: each span needs an id of its own"
            )
    _refuse_cycles(unique)
    return list(unique.values())


def _same(one: Span, other: Span) -> bool:
    """The same span, wherever each copy was read."""
    return dataclasses.replace(one, where="", file="") == dataclasses.replace(
        other, where="", file=""
    )


def _refuse_cycles(spans: dict[tuple[str, str], Span]) -> None:
    """Follow every span's parents once (each span is left behind as done): O(spans)."""
    done: set[tuple[str, str]] = set()
    for key in spans:
        path: list[tuple[str, str]] = []
        on_path: set[tuple[str, str]] = set()
        current: tuple[str, str] | None = key
        while current is not None and current in spans and current not in done:
            if current in on_path:
                _cycle([spans[k] for k in path[path.index(current) :]])
            path.append(current)
            on_path.add(current)
            parent = spans[current].parent_span_id
            current = (current[0], parent) if parent else None
        done.update(path)


def _cycle(members: list[Span]) -> None:
    first = members[0]
    if len(members) == 1:
        raise OtlpFileError(
            f"{first.where}: span {first.span_id} is its own parent (parentSpanId = spanId); "
            "a span's parent is another span, or none for the trace's root"
        )
    shown = [span.span_id for span in members[:_SHOWN_IN_A_CYCLE]]
    if len(members) > _SHOWN_IN_A_CYCLE:
        shown.append(f"… ({len(members)} spans)")
    raise OtlpFileError(
        f"{first.where}: the parents of spans {' → '.join([*shown, first.span_id])} (each "
        f"arrow leads to a span's parent) go round in a circle in trace {first.trace_id}: "
        "a trace's parents must lead to its root"
    )
