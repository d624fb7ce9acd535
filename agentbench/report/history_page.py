"""The history page: a suite's pass rate, cost, tokens and latency along the evals of the store.

One self-contained file like an eval's report (same CSP, same inline code), written to
`<report-dir>/history/index.html` (`history-<suite>/` for one suite): charts of each number
per eval, oldest to newest, then a table of the evals newest first — date, commit, branch and
subject, the numbers, the regressions and fixes each one brought, and a link to its report
when that report was written beside it — then the flaky cases.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from agentbench.evals.history.history import EvalPoint, History
from agentbench.report.charts import Chart, series
from agentbench.report.embed import script_json
from agentbench.report.html import safe_name, write_page
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules


def history_folder(suite: str | None) -> str:
    return "history" if suite is None else f"history-{suite}"


def _tick(point: EvalPoint) -> str:
    return point.commit[:7] if point.commit else point.eval_id[-6:]


def _label(point: EvalPoint) -> str:
    when = point.started_at.strftime("%Y-%m-%d %H:%M") if point.started_at else "?"
    commit = (
        f"{point.commit[:10]}{'+dirty' if point.dirty else ''}" if point.commit else "no commit"
    )
    return f"{point.eval_id} ({commit}, {when})"


def history_charts(points: list[EvalPoint]) -> list[Chart]:
    def of(value: Any) -> list[tuple[str, str, float | None]]:
        return [(_tick(p), _label(p), value(p)) for p in points]

    return [
        series(
            "h-pass", "Pass rate per eval", of(lambda p: p.pass_rate), rate=True, y_title="passed"
        ),
        series(
            "h-cost",
            "Cost per eval",
            of(lambda p: p.cost_usd),
            value_text="${:,.4f}",
            y_title="USD",
        ),
        series("h-tokens", "Tokens per eval", of(lambda p: float(p.tokens)), y_title="tokens"),
        series(
            "h-latency",
            "Latency p50 per eval",
            of(lambda p: p.latency_p50_ms),
            value_text="{:,.0f} ms",
            y_title="ms",
        ),
    ]


def history_context(history: History, out_dir: Path) -> dict[str, Any]:
    """What `history.html.j2` shows; `out_dir` is where eval reports are looked for."""
    points = history.points
    latest = points[-1] if points else None
    return {
        "history": history,
        "rows": list(reversed(points)),
        "latest": latest,
        "charts": history_charts(points),
        "reports": {p.eval_id: (Path(out_dir) / p.eval_id / "index.html").exists() for p in points},
        "regressions": sum(len(p.regressions) for p in points),
        "since": history.since.strftime("%Y-%m-%d %H:%M %Z")
        if isinstance(history.since, datetime)
        else None,
        "history_json": script_json(history.as_dict()),
    }


def write_history_report(store: Any, history: History, out_dir: Path) -> Path:
    """Write the history page into `<out_dir>/history[-<suite>]/index.html`; its path."""
    redactor = Redactor(getattr(store, "redaction", None) or RedactionRules())
    folder = Path(out_dir) / safe_name(history_folder(history.suite))
    return write_page(folder, "history.html.j2", redactor, **history_context(history, out_dir))
