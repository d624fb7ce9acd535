"""Outputs for CI systems: JUnit XML, a markdown summary (GitHub step summary), annotations.

They read an eval's trial outcomes and, when there is a baseline, its comparison; they never
run anything. `agentbench run` calls them for `--junit`, `--summary-md`, `GITHUB_STEP_SUMMARY`
and GitHub workflow-command annotations.
"""

from __future__ import annotations

from agentbench.ci.github import escape_data, escape_property, github_annotations
from agentbench.ci.junit import junit_xml, write_junit
from agentbench.ci.markdown import (
    MAX_SUMMARY_BYTES,
    append_github_step_summary,
    markdown_summary,
    write_summary_md,
)

__all__ = [
    "MAX_SUMMARY_BYTES",
    "append_github_step_summary",
    "escape_data",
    "escape_property",
    "github_annotations",
    "junit_xml",
    "markdown_summary",
    "write_junit",
    "write_summary_md",
]
