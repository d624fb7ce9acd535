"""Logs pass the same rules: agentbench's loggers carry a filter that masks each record's
message and traceback before any handler writes them. `redact_logs` puts it on them; the
redactor's module calls it as it loads (handing over how to make a redactor, so this module
need not import it back), so whatever records or replays anything has it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol


class Masks(Protocol):
    """What the filter uses of a redactor: a whole text, masked."""

    def document(self, text: str) -> str: ...


class RedactingLogFilter(logging.Filter):
    """Masks secrets in a log record — its message and its traceback — before any handler
    writes it: an exception from a tool or a provider can quote a key."""

    def __init__(self, make_redactor: Callable[[], Masks]) -> None:
        super().__init__()
        self._make_redactor = make_redactor

    def filter(self, record: logging.LogRecord) -> bool:
        # A redactor per record: the environment may have changed; logs are rare.
        redactor = self._make_redactor()
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's to report, not ours
            return True
        clean = redactor.document(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            # Formatters print `exc_text` when it is set, so the traceback is masked too.
            trace = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redactor.document(trace)
        return True


# A logger's filters see only records logged on that logger itself, so each of agentbench's
# named loggers gets one (the runtime's too: it logs provider errors, yet must not import us).
LOGGERS = ("agentbench", "agentbench.trace", "agentbench.model", "agentbench.events")


def redact_logs(make_redactor: Callable[[], Masks]) -> None:
    """Put the redacting filter, masking with a redactor `make_redactor` returns, on
    agentbench's loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingLogFilter) for f in logger.filters):
            logger.addFilter(RedactingLogFilter(make_redactor))
