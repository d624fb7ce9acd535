"""Plain-text instructions are used as written, with no template run: the same text jinja2
would make of them, and only for text jinja2 would leave as it is."""

from __future__ import annotations

import pytest

from agentbench.runtime.instructions import _ENV, InstructionsTemplate

PLAIN = [
    "You help customers.",
    'Answer in JSON: {"ok": true}.\n',  # braces that are no jinja2 syntax
    "Close a block with }} or %} — harmless alone.",
    "Ünïcödé, emoji 🍵, and a tab\there.\n\n",
]
TEMPLATED = [
    "Greet {{ agent }}.",
    "{% if state %}Known: {{ state | length }}{% endif %}Go.",
    "Hidden {# a comment #}note.",
    "Windows\r\nline endings.",  # jinja2 rewrites them
]


@pytest.mark.parametrize("source", PLAIN)
def test_plain_text_is_used_as_written_without_running_the_template(source: str) -> None:
    template = InstructionsTemplate("desk", source)

    def no_render(*args: object, **kwargs: object) -> str:
        raise AssertionError("the template ran")

    expected = _ENV.from_string(source).render({"agent": "desk", "state": []})
    template._template.render = no_render  # type: ignore[method-assign]
    assert template.render({}) == expected == source


@pytest.mark.parametrize("source", TEMPLATED)
def test_text_with_template_syntax_or_line_endings_is_rendered(source: str) -> None:
    template = InstructionsTemplate("desk", source)
    expected = _ENV.from_string(source).render({"agent": "desk", "state": [], "context": {}})
    assert template.render({}) == expected
    assert template._plain is None


def test_the_appended_sections_follow_plain_text_as_they_follow_a_rendered_one() -> None:
    plain = InstructionsTemplate("desk", "Help.\n")
    rendered = InstructionsTemplate("desk", "{{ 'Help.' }}\n")
    options = {"state": ["a: 1"], "state_summary": True, "pinned": ["p"], "handoff": "h"}
    assert plain.render({}, **options) == rendered.render({}, **options)
    assert "## State so far\n- a: 1" in plain.render({}, **options)
