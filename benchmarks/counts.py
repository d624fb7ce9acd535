"""`--clients 1,2,4` and the like: a comma-separated list of positive whole numbers, as an
argparse `type`, so a mistyped one is a usage error naming it rather than a traceback."""

from __future__ import annotations

import argparse


def counts(text: str) -> list[int]:
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 1,2,4") from None
    if any(number < 1 for number in numbers):
        raise argparse.ArgumentTypeError(f"{text!r}: each number must be 1 or more")
    return numbers
