"""Render and write HTML reports: one self-contained file per eval, and the diff of two evals.

Every template is rendered with autoescaping on and undefined names as errors, so model and
tool text can only ever appear as text. The CSS and JS live beside the templates and are
inlined; the Content-Security-Policy allows exactly those two by hash and nothing from
anywhere else, so the file works offline and an injected tag could not run.

A page is redacted before it is written (the store's rules for an eval's report, the defaults
for a diff): stored rows are already redacted, but a store written by an older version, or a
comparison quoting one, may not be. The inline CSS and JS are put in after, so the rules can
never alter the code the CSP hashes allow.

An eval's report is made and written piece by piece — the page around the trials' details,
then each trial's detail, read from the store a batch of trials at a time — so its memory
does not grow with the eval: the pieces meet at JSON punctuation (`,{`), which no redaction
rule's match can span, so redacting them one by one masks what redacting the whole would.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from agentbench._version import __version__
from agentbench.evals.comparing.own_verdict import own_verdict
from agentbench.report.comparison import comparison_view
from agentbench.report.embed import content_security_policy
from agentbench.report.loading import load_eval, trial_runs
from agentbench.report.packing import packed
from agentbench.report.page import detail_texts, page_context
from agentbench.trace.redaction.redactor import Redactor
from agentbench.trace.redaction.rules import RedactionRules

_PACKAGE = "agentbench.report"


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.4f}"


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader(_PACKAGE, "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pct=_pct, ms=_ms, num=_num, usd=_usd, when=_when)
    return env


@cache
def _assets() -> tuple[str, str]:
    folder = resources.files(_PACKAGE) / "templates"
    css = (folder / "report.css").read_text(encoding="utf-8")
    js = "\n".join(
        (folder / name).read_text(encoding="utf-8") for name in ("inflate.js", "report.js")
    )
    if "</" in js or "</" in css:  # would end the inline <script>/<style> early
        raise ValueError("the report's scripts and report.css must not contain '</'")
    return css, js


def _page(template: str, redactor: Redactor, **context: Any) -> str:
    return "".join(_page_pieces(template, redactor, context))


def _page_pieces(
    template: str,
    redactor: Redactor,
    context: dict[str, Any],
    details: Iterable[str] | None = None,
) -> Iterator[str]:
    """The page, redacted, in pieces: the whole of it, or — with `details`, the pieces of the
    `details` JSON — the page before them, each of them, and the page after."""
    css, js = _assets()
    # Stand-ins for the static code (and the details) while the page is redacted: no rule
    # matches them, and their random part means no text in the page can pose as one.
    nonce = secrets.token_hex(8)
    stand_ins = {f"@@css-{nonce}@@": css, f"@@js-{nonce}@@": js}
    stand_ins[f"@@csp-{nonce}@@"] = content_security_policy([css], [js])
    css_at, js_at, csp_at = stand_ins
    details_at = f"@@details-{nonce}@@"
    if details is not None:
        context = {**context, "details": Markup(details_at)}
    html = (
        environment()
        .get_template(template)
        .render(css=Markup(css_at), js=Markup(js_at), csp=csp_at, version=__version__, **context)
    )
    if details is None:
        yield _with_code(redactor.document(html), stand_ins)
        return
    before, after = html.split(details_at, 1)
    del html
    head = _with_code(redactor.document(before), stand_ins)
    del before
    yield head
    del head
    # Redacted first, then packed: every byte of them has passed the redactor.
    yield from packed(redactor.document(piece) for piece in details)
    yield _with_code(redactor.document(after), stand_ins)


def _with_code(html: str, stand_ins: dict[str, str]) -> str:
    """The static code put back in place of its stand-ins (those this piece holds), once each."""
    for stand_in, code in list(stand_ins.items()):
        if stand_in in html:
            html = html.replace(stand_in, code, 1)
            del stand_ins[stand_in]
    return html


def _report_pieces(
    store: Any,
    eval_id: str,
    comparison: dict[str, Any] | None,
    gate: dict[str, Any] | None = None,
) -> Iterator[str]:
    """One eval's report in pieces; the traces are read as the details are made. The eval
    is looked up now, so an unknown one is said before anything is written."""
    data = load_eval(store, eval_id, traces=False)
    if gate is None and comparison is None:
        if data.verdict is not None and data.status == "finished":
            # A report made later opens with the verdict the eval was last judged with.
            kept = data.verdict
            when = f" at {kept['judged_at']}" if kept.get("judged_at") else ""
            note = f"this is the verdict `agentbench run` or `agentbench gate` reached{when}"
            gate = {**kept, "notes": [*kept.get("notes", ()), note]}
        else:  # none kept, or the eval was restarted since: judged as `gate` would, alone
            gate = own_verdict(store, eval_id, data.outcomes).as_dict()
    context = {
        "comparison": comparison_view(comparison) if comparison is not None else None,
        **page_context(data, comparison, gate),
    }
    details = detail_texts(data.outcomes, trial_runs(store, eval_id, data.outcomes))
    redactor = Redactor(getattr(store, "redaction", None) or RedactionRules())
    return _page_pieces("report.html.j2", redactor, context, details)


def render_report(
    store: Any,
    eval_id: str,
    *,
    comparison: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
) -> str:
    """The HTML of one eval's report (with a baseline comparison section if given). `gate`
    (`failed`, `reasons`, `basis`) is the verdict the caller reached without a comparison —
    e.g. `--fail-under` — which the banner then shows instead of "every trial must pass"."""
    return "".join(_report_pieces(store, eval_id, comparison, gate))


def write_report(
    store: Any,
    eval_id: str,
    out_dir: Path = Path("reports"),
    *,
    comparison: dict[str, Any] | None = None,
    gate: dict[str, Any] | None = None,
) -> Path:
    """Write `<out_dir>/<eval_id>/index.html`, a piece at a time; returns its path (`gate` as
    in `render_report`)."""
    pieces = _report_pieces(store, eval_id, comparison, gate)
    return _write(Path(out_dir) / _safe_name(eval_id), pieces)


def render_diff_report(comparison: dict[str, Any]) -> str:
    """The HTML of a comparison alone (`agentbench diff EVAL_A EVAL_B`)."""
    return _page("diff.html.j2", Redactor(), comparison=comparison_view(comparison))


def write_diff_report(
    store: Any, comparison: dict[str, Any], out_dir: Path = Path("reports")
) -> Path:
    """Write `<out_dir>/diff-<baseline>-<current>/index.html`; returns its path.

    `store` is taken for symmetry with `write_report`: the comparison already holds what the
    page shows.
    """
    del store
    folder = f"diff-{comparison['baseline_eval']}-{comparison['current_eval']}"
    return _write(Path(out_dir) / _safe_name(folder), [render_diff_report(comparison)])


def write_page(folder: Path, template: str, redactor: Redactor, **context: Any) -> Path:
    """Write one page of `template` into `folder/index.html` (redacted, CSP'd as every
    report); returns its path."""
    return _write(folder, [_page(template, redactor, **context)])


def safe_name(name: str) -> str:
    """`name` as a folder name that cannot climb out of the reports folder."""
    return _safe_name(name)


def _safe_name(name: str) -> str:
    # Eval ids are ours, but a folder name must never climb out of out_dir.
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).lstrip(".") or "diff"


def _write(folder: Path, pieces: Iterable[str]) -> Path:
    """Write the page's pieces to `folder/index.html`: into a file beside it first, renamed
    when whole, so a report that fails half-way leaves the previous one (or none)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "index.html"
    partial = folder / f".index.html.{os.getpid()}.tmp"
    try:
        with partial.open("w", encoding="utf-8") as out:
            for piece in pieces:
                out.write(piece)
        partial.replace(path)
    except OSError as exc:  # a full disk says no file: the error names the report's
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
    return path
