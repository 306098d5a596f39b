"""Celery application factory with settings chosen for shell tool calls.

Why these settings (DESIGN.md, "Celery facts"):

* early ack + ``worker_disable_prefetch``: late ack with a visibility timeout
  ran commands twice; early ack with prefetch ran queued calls again after a
  worker joined. Shell commands are not idempotent, and a claim key per call
  id guards what remains (``worker.liveness``).
* threads pool: one address space, so sandboxes and connections are cached
  per session. It enforces no time limits, so sbx enforces deadlines itself.
* results are small JSON strings (output is bounded before it gets here).
"""

from __future__ import annotations

from celery import Celery

from .settings import Settings

TOOL_CALL_TASK = "sbx.tool_call"
PING_TASK = "sbx.ping"
APPROVAL_TASK = "sbx.approval"


def create_app(broker_url: str, settings: Settings) -> Celery:
    """A Celery app talking to ``broker_url`` (also its result backend)."""
    app = Celery("sbx", broker=broker_url, backend=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=False,
        worker_prefetch_multiplier=1,
        worker_disable_prefetch=True,
        task_default_queue=settings.queue,
        task_ignore_result=False,
        result_expires=settings.claim_ttl,
        result_extended=False,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        # No kombu ack emulation: it costs two broker round trips per message (park the
        # message in an "unacked" hash, then remove it), and with early acks it only
        # covers the instant between BRPOP and the task's start, by re-running the
        # message a visibility timeout later, long after its caller gave up. sbx's own
        # claim key already makes each call run at most once.
        broker_transport_options={"ack_emulation": False},
        worker_enable_remote_control=False,
        enable_utc=True,
    )
    return app
