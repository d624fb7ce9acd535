"""HTML reports of stored evals: `write_report` for one eval, `write_diff_report` for two,
`write_history_report` for the store's evals along the git history.

A report is one self-contained file (inline CSS, JS and SVG charts; nothing fetched) read
from the trace store: the gate's verdict and the cases that need a look first, then the
numbers, a sortable, filterable, deep-linkable table of every case × trial, and each trial's
input, expectations, output, transcript and trace timeline, built when the row is expanded.
"""

from agentbench.report.history_page import write_history_report
from agentbench.report.html import (
    render_diff_report,
    render_report,
    write_diff_report,
    write_report,
)
from agentbench.report.loading import resolve_eval_id

__all__ = [
    "render_diff_report",
    "render_report",
    "resolve_eval_id",
    "write_diff_report",
    "write_history_report",
    "write_report",
]
