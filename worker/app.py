"""Celery application factory with settings chosen for shell tool calls.

Why these settings (DESIGN.md, "Celery facts"):

* early ack + ``worker_disable_prefetch``: late ack with a visibility timeout
  ran commands twice; early ack with prefetch ran queued calls again after a
  worker joined. Shell commands are not idempotent, and a claim key per call
  id guards what remains (``worker.liveness``).
* threads pool: one address space, so sandboxes and connections are cached
  per session. It enforces no time limits, so sbx enforces deadlines itself.
* no result backend: every sbx task answers through its own mailbox in the
  broker's Redis (``worker.liveness``), one push and one blocking pop, where
  Celery's Redis backend spends a subscribe, a publish, a read of the stored
  meta and an unsubscribe, and gives up for good after 20 failed reconnects.
"""

from __future__ import annotations

from celery import Celery

from .settings import Settings

TOOL_CALL_TASK = "sbx.tool_call"
PING_TASK = "sbx.ping"
APPROVAL_TASK = "sbx.approval"


def create_app(broker_url: str, settings: Settings) -> Celery:
    """A Celery app talking to ``broker_url`` (no result backend: see the module doc)."""
    app = Celery("sbx", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=False,
        worker_prefetch_multiplier=1,
        worker_disable_prefetch=True,
        task_default_queue=settings.queue,
        task_ignore_result=True,
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
        # Early acks: a lost connection has no unacked task to cancel (and this silences
        # Celery's deprecation warning about the default changing in 6.0).
        worker_cancel_long_running_tasks_on_connection_loss=False,
        enable_utc=True,
    )
    return app
