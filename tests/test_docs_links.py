"""No documentation page points outside the repository.

In README.md and docs/**/*.md, a link is a public web address or a relative path to a file
of the repository (a docs page's to a file under docs/, which is what the site has);
nothing names a path on the machine the docs were written on or a document users do not
have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs_blocks import DOCS, ROOT, page_id, pages

_FENCED = re.compile(r"^( *)(`{3,}|~{3,}).*?^\1\2`*\s*$", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
_HTML = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""")
_PUBLIC = ("https://", "http://", "mailto:")
# Places that exist only where the docs were written.
_FORBIDDEN = ("../shared", "/work/", "DESIGN.md")


def link_targets(text: str) -> list[str]:
    prose = _CODE_SPAN.sub("", _FENCED.sub("", text))
    return [target for pattern in (_INLINE, _REFERENCE, _HTML) for target in pattern.findall(prose)]


def link_problem(page: Path, target: str) -> str | None:
    if target.startswith(_PUBLIC) or target.startswith("#"):
        return None
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return "a link of a scheme other than https, http or mailto"
    if target.startswith("/"):
        return "an absolute path (it names a place on one machine)"
    path = target.split("#", 1)[0].split("?", 1)[0]
    resolved = (page.parent / path).resolve()
    home = DOCS if page.is_relative_to(DOCS) else ROOT
    if not resolved.is_relative_to(home):
        where = "docs/ (the site has nothing else)" if home == DOCS else "the repository"
        return f"leads outside {where}"
    if not resolved.exists():
        return "no such file"
    return None


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_links_stay_in_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    problems = [
        f"{page_id(page)}: ({target}) {problem}"
        for target in link_targets(text)
        if (problem := link_problem(page, target)) is not None
    ]
    problems += [
        f"{page_id(page)}:{number}: names {name!r}, which readers do not have"
        for number, line in enumerate(text.splitlines(), start=1)
        for name in _FORBIDDEN
        if name in line
    ]
    assert not problems, "\n".join(problems)


def test_what_counts_as_leaving_the_repository(tmp_path: Path) -> None:
    page = ROOT / "README.md"
    text = (
        "[ok](docs/index.md) [web](https://pypi.org/project/agentbench/) [top](#the-tour)\n"
        "[design](../shared/DESIGN.md) [abs](/work/main/README.md) [gone](docs/nothing.md)\n"
        "`[not a link](../x.md)`\n```text\n[nor this](../y.md)\n```\n"
        '<a href="file:///etc/passwd">x</a>\n[ref]: ../outside.md\n'
    )
    found = {target: link_problem(page, target) for target in link_targets(text)}
    assert found == {
        "docs/index.md": None if (ROOT / "docs/index.md").exists() else "no such file",
        "https://pypi.org/project/agentbench/": None,
        "#the-tour": None,
        "../shared/DESIGN.md": "leads outside the repository",
        "/work/main/README.md": "an absolute path (it names a place on one machine)",
        "docs/nothing.md": "no such file",
        "file:///etc/passwd": "a link of a scheme other than https, http or mailto",
        "../outside.md": "leads outside the repository",
    }
    guide = DOCS / "guides" / "replay.md"
    assert (
        link_problem(guide, "../../README.md") == "leads outside docs/ (the site has nothing else)"
    )
    assert link_problem(guide, "../reference/cli.md#agentbench-run") is None
