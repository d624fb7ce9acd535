"""Logs pass the same rules: agentbench's loggers carry a filter that masks each record's
message and traceback before any handler writes them. `redact_logs` puts it on them; the
redactor's module calls it as it loads, so whatever records or replays anything has it."""

from __future__ import annotations

import logging


class RedactingLogFilter(logging.Filter):
    """Masks secrets in a log record — its message and its traceback — before any handler
    writes it: an exception from a tool or a provider can quote a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Imported here: the redactor's module puts this filter on the loggers as it loads.
        from agentbench.trace.redaction.redactor import Redactor

        redactor = Redactor()  # per record: the environment may have changed; logs are rare
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


def redact_logs() -> None:
    """Put the redacting filter on agentbench's loggers (idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingLogFilter) for f in logger.filters):
            logger.addFilter(RedactingLogFilter())
