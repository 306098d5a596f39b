"""Helpers of the operations tests: a worker with its own stdout/stderr, the CLI, a
Prometheus scrape, and a TCP proxy whose connections a test can cut."""

from __future__ import annotations

import contextlib
import selectors
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import REPO, wait_until

Sample = tuple[str, tuple[tuple[str, str], ...]]


class OpsWorker:
    """``sbx worker ARGS`` in its own process; stdout and stderr in separate files."""

    def __init__(self, env: dict[str, str], workdir: Path, *args: str) -> None:
        self.env = env
        self.args = list(args)
        self.out = workdir / "worker.out"
        self.err = workdir / "worker.err"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OpsWorker:
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "worker.cli.main", "worker", *self.args],
                env=self.env, cwd=str(REPO), stdout=out, stderr=err,
            )  # fmt: skip
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def worker_id(self) -> str:
        return f"{socket.gethostname()}:{self.pid}"

    def wait_healthy(self, timeout: float = 90.0) -> None:
        """Until ``sbx health --worker`` answers 0 (fails early if the worker exits)."""

        def healthy() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"worker exited early:\n{self.logs()}")
            return sbx("health", "--worker", self.worker_id, "--timeout", "2", env=self.env)[0] == 0

        wait_until(healthy, timeout, "the worker to answer its health probe")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in (self.out, self.err) if p.exists())


def sbx(*args: str, env: dict[str, str], timeout: float = 120.0) -> tuple[int, str, str]:
    """Run the ``sbx`` CLI; ``(exit status, stdout, stderr)``."""
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli.main", *args],
        env=env, cwd=str(REPO), capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def scrape(port: int) -> dict[Sample, float]:
    """Every sample of ``http://127.0.0.1:port/metrics`` by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: dict[Sample, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    """The sample ``name{labels}`` (0 when absent)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``target``; :meth:`cut` closes every connection and
    refuses new ones until :meth:`restore` (a broker connection that died)."""

    def __init__(self, target: tuple[str, int], port: int) -> None:
        self.target = target
        self.port = port
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def restore(self) -> None:
        """Listen (again) and forward."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def cut(self) -> None:
        """Stop listening and reset every forwarded connection."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        with contextlib.suppress(OSError, ValueError):
            sel.register(a, selectors.EVENT_READ, b)
            sel.register(b, selectors.EVENT_READ, a)
            while True:
                for key, _ in sel.select():
                    src = key.fileobj
                    assert isinstance(src, socket.socket)
                    data = src.recv(65536)
                    if not data:
                        return
                    key.data.sendall(data)
        sel.close()


@contextlib.contextmanager
def tcp_proxy(target: tuple[str, int], port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(target, port)
    proxy.restore()
    try:
        yield proxy
    finally:
        proxy.cut()
