"""``sbx demo``: the main job end to end on the embedded broker, in one command.

Starts the embedded broker (if no ``SBX_BROKER_URL``), a real worker process,
sends terminal calls of one session through it, prints what a model would
see, and stops what it started.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from typing import Any

from process_registry.private_dirs import make_private_dirs
from worker.broker.embedded import EmbeddedBroker
from worker.settings import get_settings

from .output import EXIT_FAILURE, EXIT_OK, fail

DEMO_CALLS: list[tuple[str, Any]] = [
    ("terminal", {"command": "echo hello from $(uname -s) && pwd"}),
    ("terminal", {"command": "mkdir -p /tmp/sbx-demo && cd /tmp/sbx-demo && export GREETING=hi"}),
    ("terminal", {"command": 'echo "$GREETING from $PWD"'}),
    ("terminal", {"command": "echo partial; exit 3"}),
    ("terminal", {"command": 'read line; echo "stdin gave: [$line]"'}),
    ("terminal", {"command": "sleep 30", "timeout": 1}),
    ("terminal", {"command": "echo still here in $PWD"}),
    ("terminal", {"command": 42}),
    ("no_such_tool", {}),
]


def cmd_demo(args: argparse.Namespace) -> int:
    from worker.client import SandboxClient

    settings = get_settings()
    started_broker = False
    broker = EmbeddedBroker(settings.home, settings.embedded_redis_server)
    if not settings.broker_url:
        started_broker = broker.ensure_running()
        print(f"broker: embedded redis on {broker.socket_path}")
    make_private_dirs(settings.home)
    log_path = settings.home / "demo-worker.log"
    with open(log_path, "ab") as log:
        os.chmod(log_path, 0o600)
        worker = subprocess.Popen(
            [sys.executable, "-m", "worker.cli.main", "worker", "--loglevel", "WARNING"],
            env=os.environ.copy(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    status = EXIT_OK
    try:
        with SandboxClient(session_id="demo", settings=settings) as client:
            if not client.ping(timeout=60):
                fail("the worker did not answer within 60 s", EXIT_FAILURE)
            print(f"worker: pid {worker.pid} (log: {log_path}), session 'demo'\n")
            for tool, call_args in DEMO_CALLS:
                print(f"> {tool} {json.dumps(call_args)}")
                print(f"< {client.tool_call(tool, call_args)}\n")
    except Exception:
        status = EXIT_FAILURE
        raise
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        if started_broker and not args.keep_broker:
            broker.stop()
    return status


def add_demo_command(sub: Any) -> None:
    """Register ``sbx demo``."""
    p = sub.add_parser("demo", help="run terminal calls through a real worker and show results")
    p.add_argument("--keep-broker", action="store_true", help="leave the embedded broker running")
    p.set_defaults(func=cmd_demo)
