"""A real RabbitMQ node for tests: loopback only, its own data directory, epmd and ports."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

from tests.helpers import free_port, require, short_tmpdir, wait_until

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""Debian's start script itself (/usr/sbin/rabbitmq-server would switch to the rabbitmq user)."""


class RabbitMQProcess:
    """A real RabbitMQ node on loopback only, with its own data dir, epmd and ports.

    AMQP on 127.0.0.1 at a free port, the Erlang distribution on 127.0.0.1
    (``inet_dist_use_interface``) at another, and a private epmd bound to
    127.0.0.1 at a third, so nothing listens beyond loopback and nothing is
    shared with a system RabbitMQ. Nothing of /etc/rabbitmq is read.
    """

    def __init__(self) -> None:
        require(
            os.access(RABBITMQ_SERVER, os.X_OK),
            "rabbitmq-server is not installed (apt-get install rabbitmq-server)",
        )
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        self.workdir = short_tmpdir("sbx-rabbitmq-")
        self.log_path = self.workdir / "rabbitmq.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def _env(self) -> dict[str, str]:
        d = self.workdir
        (d / "rabbitmq.conf").write_text("loopback_users.guest = true\n")
        (d / "enabled_plugins").write_text("[].\n")
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(d),  # the Erlang cookie goes here
            "LANG": "C.UTF-8",
            "RABBITMQ_CONF_ENV_FILE": str(d / "no-rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(d / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(d / "no-advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(d / "enabled_plugins"),
            "RABBITMQ_NODENAME": f"sbx-test-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_MNESIA_BASE": str(d / "mnesia"),
            "RABBITMQ_LOG_BASE": str(d / "log"),
            "RABBITMQ_LOGS": "-",
        }

    def answers(self) -> bool:
        """True once the node accepts an AMQP login."""
        import amqp

        conn = amqp.Connection(
            f"127.0.0.1:{self.port}", userid="guest", password="guest", connect_timeout=1
        )
        try:
            conn.connect()
            return True
        except (OSError, amqp.exceptions.AMQPError):
            return False
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def start(self) -> None:
        """Start the node and wait until it accepts AMQP connections (boot takes seconds)."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [RABBITMQ_SERVER], env=self._env(), cwd=str(self.workdir),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"rabbitmq-server exited early:\n{self.log()}")
            return self.answers()

        wait_until(ready, 120, "rabbitmq-server to accept AMQP connections")

    def queue_info(self, name: str) -> tuple[int, int] | None:
        """``(messages, consumers)`` of queue ``name`` (passive declare), None if absent."""
        import amqp

        with amqp.Connection(f"127.0.0.1:{self.port}", userid="guest", password="guest") as conn:
            channel = conn.channel()
            try:
                ok = channel.queue_declare(name, passive=True)
            except amqp.exceptions.NotFound:
                return None
            return int(ok.message_count), int(ok.consumer_count)

    def purge(self, name: str) -> None:
        """Drop the messages of queue ``name`` (if it exists): a clean slate per test."""
        import amqp

        with (
            amqp.Connection(f"127.0.0.1:{self.port}", userid="guest", password="guest") as conn,
            contextlib.suppress(amqp.exceptions.NotFound),
        ):
            conn.channel().queue_purge(name)

    def stop(self) -> None:
        """Stop the node (SIGTERM: a clean shutdown), its epmd, and remove its data."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        epmd = shutil.which("epmd")
        if epmd is not None:  # the node started a private epmd daemon on our port
            subprocess.run(
                [epmd, "-kill"], env={**self._env(), "ERL_EPMD_PORT": str(self.epmd_port)},
                capture_output=True, timeout=30, check=False,
            )  # fmt: skip
        shutil.rmtree(self.workdir, ignore_errors=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def rabbitmq_server() -> Iterator[RabbitMQProcess]:
    """A real RabbitMQ node on 127.0.0.1 (see :class:`RabbitMQProcess`), stopped at the end."""
    server = RabbitMQProcess()
    try:
        server.start()
        yield server
    finally:
        server.stop()
