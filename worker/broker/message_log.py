"""Celery's reports of messages it discards, without the messages' content.

Celery logs a message it cannot decode, or one naming no known task, with its
body, headers and delivery info. On sbx's queues a body is a tool call: a
command, its arguments, a session's proof -- often secrets. This filter keeps
the report (one line saying what was dropped and why) and drops the content.
"""

from __future__ import annotations

import logging

from celery.worker.consumer import consumer as celery_consumer

CONSUMER_LOGGER = "celery.worker.consumer.consumer"
"""The logger Celery reports discarded messages on."""

_REPLACED = {
    celery_consumer.MESSAGE_DECODE_ERROR: "dropped a message whose body does not decode",
    celery_consumer.UNKNOWN_FORMAT: "dropped a message that is not a task message",
    celery_consumer.UNKNOWN_TASK_ERROR: "dropped a message naming a task this worker lacks",
    celery_consumer.INVALID_TASK_ERROR: "dropped an invalid task message",
}


class DiscardedMessageFilter(logging.Filter):
    """Rewrites Celery's discarded-message reports to say what, never the content."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = _REPLACED.get(record.msg) if isinstance(record.msg, str) else None
        if text is not None:
            # The arguments hold the body, headers and the decoder's error, which quotes
            # the body; the traceback would quote it too.
            first = record.args[0] if isinstance(record.args, tuple) and record.args else None
            kind = f" ({type(first).__name__})" if isinstance(first, BaseException) else ""
            record.msg = f"{text}{kind}; its content is not logged"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


def install() -> None:
    """Filter Celery's consumer logger (idempotent)."""
    logger = logging.getLogger(CONSUMER_LOGGER)
    if not any(isinstance(f, DiscardedMessageFilter) for f in logger.filters):
        logger.addFilter(DiscardedMessageFilter())
