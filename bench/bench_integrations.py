"""Where platforms plug in: one ``echo hi`` through each way in, beside raw ``bash -c``.

    python -m bench.bench_integrations [--n 200]

One real ``sbx worker`` (embedded broker, a temporary home, local backend). Paths, with
samples taken in turns so load drift hits all alike:

* raw ``bash -c 'echo hi'`` (the baseline) and ``SandboxClient.tool_call`` (sbx direct);
* ``sbx mcp`` over stdio and over streamable HTTP, called by the MCP SDK's client;
* the inspect_ai ``sbx`` sandbox's ``exec``, beside inspect's own ``local`` sandbox.

Read: what MCP adds to the direct call (the SDK's framing and validation, a thread
hop; over HTTP also the request), and what the sbx sandbox's ``exec`` adds to it (one
subshell and one ``cat``: stdout and stderr apart, nothing left in the session) --
inspect's local sandbox is one process on this machine, with no broker, no worker and
no isolation. Target: each MCP transport within 3x the direct call.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from bench.stats import measure_paths, report
from worker.client import SandboxClient
from worker.settings import Settings, get_settings

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def running_worker(home: Path) -> Iterator[dict[str, str]]:
    """A worker on ``home``; yields the environment of platform-side processes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    env.update(SBX_HOME=str(home), PYTHONPATH=str(REPO), SBX_LOCAL_CWD=str(home))
    log = open(home / "worker.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "worker.cli.main", "worker", "--loglevel",
                             "WARNING"], env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        with SandboxClient(session_id="bench-ready", settings=Settings(home=home)) as probe:
            deadline = time.monotonic() + 90
            while not probe.ping(timeout=1.0):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"the worker did not start: see {home / 'worker.log'}")
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


@contextlib.asynccontextmanager
async def mcp_http_server(env: dict[str, str]) -> AsyncIterator[str]:
    """``sbx mcp --transport http`` on a free loopback port; its URL."""
    proc = await anyio.open_process(
        [sys.executable, "-m", "worker.cli.main", "mcp", "--transport", "http", "--port", "0"],
        env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        seen = b""
        while not (found := re.search(rb"serving (http://\S+)", seen)):
            seen += await proc.stderr.receive()
        yield found.group(1).decode()
    finally:
        proc.terminate()
        await proc.wait()


@contextlib.asynccontextmanager
async def mcp_clients(env: dict[str, str], home: Path) -> AsyncIterator[tuple[Any, Any]]:
    """An MCP SDK client over stdio and one over HTTP, each its own sbx session."""
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from worker.identity import load_signer

    token = load_signer(Settings(home=home)).token("bench-mcp-http")
    stdio = StdioServerParameters(command=sys.executable, args=["-m", "worker.cli.main", "mcp"],
                                  env={**env, "SBX_SESSION_ID": "bench-mcp-stdio"})  # fmt: skip
    async with (
        mcp_http_server(env) as url,
        httpx2.AsyncClient(auth=httpx2.BasicAuth("bench-mcp-http", token),
                           timeout=httpx2.Timeout(30, read=300)) as http,
        Client(stdio) as over_stdio,
        Client(streamable_http_client(url, http_client=http)) as over_http,
    ):  # fmt: skip
        yield over_stdio, over_http


@contextlib.asynccontextmanager
async def inspect_sandboxes() -> AsyncIterator[tuple[Any, Any]]:
    """A sample's sbx sandbox (local backend) and one of inspect's own local sandbox."""
    from inspect_ai.util._sandbox.local import LocalSandboxEnvironment

    from worker.integrations.inspect_provider import SbxSandboxConfig, SbxSandboxEnvironment

    config = SbxSandboxConfig(backend="local", session_prefix="bench")
    ours = await SbxSandboxEnvironment.sample_init("bench", config, {})
    theirs = await LocalSandboxEnvironment.sample_init("bench", None, {})
    try:
        yield ours["default"], theirs["default"]
    finally:
        await SbxSandboxEnvironment.sample_cleanup("bench", config, ours, False)
        await LocalSandboxEnvironment.sample_cleanup("bench", None, theirs, False)


def raw_bash() -> None:
    subprocess.run(["bash", "-c", "echo hi"], check=True, stdout=subprocess.DEVNULL)


def blocking(portal: BlockingPortal, make: Callable[[], Awaitable[Any]]) -> Callable[[], Any]:
    return lambda: portal.call(make)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="sbx-bench-int-", dir="/tmp"))
    os.environ["SBX_HOME"] = str(home)
    get_settings.cache_clear()
    try:
        with (
            running_worker(home) as env,
            start_blocking_portal() as portal,
            SandboxClient(session_id="bench-direct") as direct,
            portal.wrap_async_context_manager(mcp_clients(env, home)) as (stdio, http),
            portal.wrap_async_context_manager(inspect_sandboxes()) as (ours, theirs),
        ):
            echo = {"command": "echo hi"}
            paths: list[tuple[str, Callable[[], object]]] = [
                ("raw bash -c", raw_bash),
                ("sbx client tool_call", lambda: direct.tool_call("terminal", echo)),
                ("sbx mcp stdio", blocking(portal, lambda: stdio.call_tool("terminal", echo))),
                ("sbx mcp http", blocking(portal, lambda: http.call_tool("terminal", echo))),
                ("inspect sbx exec", blocking(portal, lambda: ours.exec(["echo", "hi"]))),
                ("inspect local exec", blocking(portal, lambda: theirs.exec(["echo", "hi"]))),
            ]
            timings = measure_paths(paths, args.n, interleave=True)
            print(report(timings, timings[0]))
            by = {t.name: t.p50 for t in timings}
            print(f"mcp stdio - direct: {by['sbx mcp stdio'] - by['sbx client tool_call']:.2f} ms;"
                  f" mcp http - direct: {by['sbx mcp http'] - by['sbx client tool_call']:.2f} ms;"
                  f" inspect sbx / inspect local: "
                  f"{by['inspect sbx exec'] / by['inspect local exec']:.2f}x")  # fmt: skip
    finally:
        get_settings.cache_clear()
        from worker.broker.embedded import EmbeddedBroker

        EmbeddedBroker(home).stop()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
