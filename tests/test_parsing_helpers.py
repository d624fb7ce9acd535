"""Argument parsing, Retry-After, token estimates: the small parts the loop leans on."""

from __future__ import annotations

import email.utils
import time

import pytest

from agentbench.runtime.arguments import ArgumentsParseError, parse_arguments
from agentbench.runtime.retry import RetryPolicy, is_retryable_status, parse_retry_after
from agentbench.runtime.tokens import estimate_tokens


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        (None, {}),
        ("  ", {}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
        ('Sure! {"a": {"b": 2}} done', {"a": {"b": 2}}),
        ('noise {not json} then {"a": 3}', {"a": 3}),
        ({"already": "dict"}, {"already": "dict"}),
    ],
)
def test_tolerant_parse_accepts(raw, expected) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"a": ', "not valid JSON: Expecting value at line 1 column 6"),
        ("[1, 2]", "must be a JSON object, got list"),
        ('"text"', "must be a JSON object, got str"),
        ("no braces here", "not valid JSON"),
    ],
)
def test_tolerant_parse_rejects_with_a_reason(raw, fragment) -> None:
    with pytest.raises(ArgumentsParseError, match=None) as info:
        parse_arguments(raw)
    assert fragment in str(info.value)


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": future}) <= 31


def test_backoff_grows_is_bounded_and_jittered() -> None:
    policy = RetryPolicy(initial_backoff_s=1, max_backoff_s=5, multiplier=2, jitter=0.25)
    for attempt, base in [(1, 1), (2, 2), (3, 4), (4, 5), (9, 5)]:
        delays = {policy.backoff(attempt) for _ in range(20)}
        assert all(base * 0.75 <= d <= base * 1.25 for d in delays)
        assert len(delays) > 1, "jitter spreads retries"
    assert policy.backoff(1, retry_after=3) == 3
    assert policy.backoff(1, retry_after=1e9) == policy.max_retry_after_s


def test_retryable_statuses() -> None:
    assert all(is_retryable_status(s) for s in (408, 409, 429, 500, 502, 503))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 422))
    assert not is_retryable_status(503, {"x-should-retry": "false"})
    assert is_retryable_status(400, {"x-should-retry": "true"})


def test_token_estimate_is_sane_for_english_and_chinese() -> None:
    english = "The quick brown fox jumps over the lazy dog. " * 10
    chinese = "敏捷的棕色狐狸跳过了懒狗。" * 10
    assert 90 <= estimate_tokens(english) <= 130  # ~4 chars a token
    assert estimate_tokens(chinese) == len(chinese)  # ~1 token a character
    assert estimate_tokens("") == 0
