"""``sbx mcp`` against the official MCP SDK's own client and a real worker, both transports.

stdio: the SDK client launches ``sbx mcp`` as its subprocess (the session from
``SBX_SESSION_ID``/``SBX_SESSION_TOKEN``). HTTP: one ``sbx mcp --transport http`` process
on 127.0.0.1 serves every test; each connection names its session in ``Authorization``,
and is tried in both protocol eras the SDK speaks (``auto`` negotiates 2026-07-28,
``legacy`` the initialize handshake). Waits are on conditions (files, processes, lines),
never on time.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.helpers import REPO, require_module, sleeping, unique_sleep_seconds, wait_until
from tests.integration.deployment import Deployment, deployment
from worker.errors import ProcessError

require_module("mcp", "pip install 'sbx[mcp]'")

import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

WAIT = 120.0  # upper bound for a condition, never a timing assertion
TRANSPORTS = ["stdio", "http", "http-legacy"]


@pytest.fixture(scope="module")
def sbx_deployment() -> Iterator[Deployment]:
    with deployment(SBX_LOCAL_KILL_GRACE="0.5") as running:
        yield running


@pytest.fixture(scope="module")
def http_url(sbx_deployment: Deployment) -> Iterator[str]:
    """``sbx mcp --transport http`` on a free loopback port; its URL."""
    log = sbx_deployment.home / "mcp-http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker.cli.main", "mcp", "--transport", "http", "--port", "0"],
            env=sbx_deployment.env(PYTHONPATH=str(REPO)), cwd=str(REPO),
            stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    found: list[str] = []

    def serving() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"sbx mcp exited: {log.read_text()}")
        found[:] = re.findall(r"serving (http://\S+)", log.read_text())
        return bool(found)

    try:
        wait_until(serving, WAIT, "sbx mcp to listen")
        yield found[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WAIT)
    assert "sbx1." not in log.read_text()  # no session token ever reaches its log


def _http(session_id: str, token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(auth=httpx2.BasicAuth(session_id, token),
                              timeout=httpx2.Timeout(30, read=300))  # fmt: skip


@contextlib.asynccontextmanager
async def connect(
    transport: str, dep: Deployment, url: str, session_id: str, **env: str
) -> AsyncIterator[Client]:
    """One MCP connection acting as ``session_id`` over ``transport``."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "worker.cli.main", "mcp"], cwd=str(REPO),
            env=dep.env(PYTHONPATH=str(REPO), SBX_SESSION_ID=session_id, **env),
        )  # fmt: skip
        async with Client(params) as client:
            yield client
        return
    mode = "legacy" if transport == "http-legacy" else "auto"
    async with _http(session_id, dep.token(session_id)) as http, Client(
        streamable_http_client(url, http_client=http), mode=mode
    ) as client:
        yield client


@pytest.fixture
def url(request: pytest.FixtureRequest, transport: str) -> str:
    return "" if transport == "stdio" else str(request.getfixturevalue("http_url"))


def text_of(result: Any) -> str:
    [content] = result.content
    return str(content.text)


async def call(client: Client, name: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(text_of(await client.call_tool(name, args, **kw)))
    return parsed


def session() -> str:
    return f"mcp-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_are_the_worker_tools(
    transport: str, sbx_deployment: Deployment, url: str
) -> None:
    from worker.mcp_server.tools import load_definitions
    from worker.settings import get_settings

    definitions = {d["function"]["name"]: d["function"]
                   for d in load_definitions(get_settings(), None)}  # fmt: skip
    async with connect(transport, sbx_deployment, url, session()) as client:
        tools = (await client.list_tools()).tools
    assert {"terminal", "process"} <= set(definitions)
    assert {t.name: t.input_schema for t in tools} == {
        name: d["parameters"] for name, d in definitions.items()
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_connection_is_one_session(
    transport: str, sbx_deployment: Deployment, url: str, tmp_path: Path
) -> None:
    sid, other = session(), session()
    async with connect(transport, sbx_deployment, url, sid) as client:
        first = await client.call_tool("terminal", {"command": f"cd {tmp_path} && export X=7"})
        assert first.is_error is False
        assert set(json.loads(text_of(first))) == {
            "output", "exit_code", "error", "cwd", "truncated", "duration_ms"
        }
        again = await call(client, "terminal", {"command": 'echo "$X $PWD"'})
        assert (again["output"], again["exit_code"]) == (f"7 {tmp_path}\n", 0)
        started = await call(client, "terminal", {"command": "sleep 300", "background": True})
        with sbx_deployment.client(sid) as owner, sbx_deployment.client(other) as stranger:
            assert owner.poll(started["process_id"]).status == "running"
            with pytest.raises(ProcessError) as refused:
                stranger.poll(started["process_id"])
            assert refused.value.status in ("not_found", "denied")
            owner.kill(started["process_id"])
            # Exactly the tool-result JSON: byte for byte what the client itself gets.
            unknown = await client.call_tool("no_such_tool", {})
            assert unknown.is_error is True
            assert text_of(unknown) == owner.tool_call("no_such_tool", {})
    async with connect(transport, sbx_deployment, url, other) as client:
        fresh = await call(client, "terminal", {"command": 'echo "[$X]"'})
    assert fresh["output"] == "[]\n"  # another connection, another session


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_while_a_call_runs(
    transport: str, sbx_deployment: Deployment, url: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    command = f"echo first; while [ ! -e {release} ]; do sleep 0.1; done; echo second"
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))
        release.touch()  # the command ends only once a notification came

    async with connect(transport, sbx_deployment, url, session()) as client:
        result = await call(client, "terminal", {"command": command, "timeout": 600},
                            progress_callback=on_progress)  # fmt: skip
    assert (result["output"], result["exit_code"]) == ("first\nsecond\n", 0)
    assert notes and all(total == 600 for _, total, _ in notes)
    assert [p for p, _, _ in notes] == sorted({p for p, _, _ in notes})  # strictly growing
    assert all(message for _, _, message in notes)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancelling_the_request_kills_the_command(
    transport: str, sbx_deployment: Deployment, url: str, tmp_path: Path
) -> None:
    seconds = unique_sleep_seconds()  # found on this host past the jail's pid namespace
    started = tmp_path / "started"
    command = f"touch {started} && exec sleep {seconds}"

    async with connect(transport, sbx_deployment, url, session()) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "terminal", {"command": command, "timeout": 600})
            await anyio.to_thread.run_sync(wait_until, started.exists, WAIT, "the command")
            await anyio.to_thread.run_sync(
                wait_until, lambda: sleeping(seconds), WAIT, "the sleep to run"
            )
            group.cancel_scope.cancel()
        await anyio.to_thread.run_sync(
            wait_until, lambda: not sleeping(seconds), WAIT, "the command to be killed"
        )
        after = await call(client, "terminal", {"command": "echo alive"})
    assert after["output"] == "alive\n"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_malformed_timeout_is_a_tool_error(
    sbx_deployment: Deployment, url: str, transport: str
) -> None:
    """A model's malformed ``timeout`` comes back as the tool's own argument error (a
    result it reads), not as a protocol error of the server; the connection serves on."""
    async with connect(transport, sbx_deployment, url, session()) as client:
        refused = [
            await client.call_tool("terminal", {"command": "echo no", "timeout": bad})
            for bad in ("soon", [5])
        ]
        after = await call(client, "terminal", {"command": "echo alive"})
    for result in refused:
        assert result.is_error is True
        assert "Invalid arguments for terminal: timeout" in json.loads(text_of(result))["error"]
    assert after["output"] == "alive\n"


async def test_stdio_answers_lines_that_are_no_message(sbx_deployment: Deployment) -> None:
    """Over stdio a line that is not JSON, a batch, or a request of a bad shape gets its
    JSON-RPC error (the request's own id when it has one) instead of silence that leaves
    the client waiting; a malformed notification gets none; the server serves on."""
    env = sbx_deployment.env(PYTHONPATH=str(REPO), SBX_SESSION_ID=session())
    init = {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "not json {",
        [{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}],
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": []},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": 7},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "terminal", "arguments": {"command": "echo alive"}}},
    ]  # fmt: skip
    wire = b"".join((x if isinstance(x, str) else json.dumps(x)).encode() + b"\n" for x in lines)
    command = [sys.executable, "-m", "worker.cli.main", "mcp"]
    answers: list[dict[str, Any]] = []
    async with await anyio.open_process(command, env=env, cwd=str(REPO)) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send(wire)
        received = b""
        with anyio.fail_after(WAIT):
            while not answers or answers[-1].get("id") != 4:
                received += await proc.stdout.receive()
                *whole, received = received.split(b"\n")
                answers += [json.loads(line) for line in whole if line.strip()]
        await proc.stdin.aclose()
    errors = [(a["id"], a["error"]["code"]) for a in answers[1:-1]]
    assert errors == [(None, -32700), (None, -32600), (3, -32600)]
    assert json.loads(answers[-1]["result"]["content"][0]["text"])["output"] == "alive\n"


async def test_stdio_acts_with_the_configured_token(
    sbx_deployment: Deployment, tmp_path: Path
) -> None:
    sid = session()
    good = {"SBX_SESSION_TOKEN": sbx_deployment.token(sid)}
    async with connect("stdio", sbx_deployment, "", sid, **good) as client:
        assert (await call(client, "terminal", {"command": "echo ok"}))["output"] == "ok\n"
    wrong = {"SBX_SESSION_TOKEN": sbx_deployment.token("someone-else")}
    async with connect("stdio", sbx_deployment, "", sid, **wrong) as client:
        refused = await client.call_tool("terminal", {"command": f"touch {tmp_path}/ran"})
    assert refused.is_error is True
    assert json.loads(text_of(refused))["status"] == "denied"
    assert not (tmp_path / "ran").exists()


async def test_http_requires_the_session_in_the_header(
    sbx_deployment: Deployment, http_url: str
) -> None:
    sid = session()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient() as http:
        missing = await http.post(http_url, json=body, headers=headers)
        wrong = await http.post(http_url, json=body, headers=headers,
                                auth=httpx2.BasicAuth(sid, sbx_deployment.token("another")))
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert "sbx1." not in wrong.text
    bearer = {"Authorization": f"Bearer {sid}/{sbx_deployment.token(sid)}"}
    async with (
        httpx2.AsyncClient(headers=bearer, timeout=httpx2.Timeout(30, read=300)) as http,
        Client(streamable_http_client(http_url, http_client=http)) as client,
    ):
        assert (await call(client, "terminal", {"command": "echo b"}))["output"] == "b\n"


async def test_http_requests_act_as_their_own_sessions(
    sbx_deployment: Deployment, http_url: str, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with connect("http-legacy", sbx_deployment, http_url, session()) as one, connect(
        "http-legacy", sbx_deployment, http_url, session()
    ) as two:
        await call(one, "terminal", {"command": f"cd {tmp_path}/a"})
        await call(two, "terminal", {"command": f"cd {tmp_path}/b"})
        where = [(await call(c, "terminal", {"command": "pwd"}))["output"] for c in (one, two)]
    assert where == [f"{tmp_path}/a\n", f"{tmp_path}/b\n"]


DEMO_SERVER = """
from mcp.server.mcpserver import MCPServer

app = MCPServer("demo")

@app.tool()
def echo(text: str) -> str:
    \"\"\"Echo the text back.\"\"\"
    return "echo:" + text

if __name__ == "__main__":
    app.run()
"""


async def test_tools_of_aggregated_mcp_servers_are_served(tmp_path: Path) -> None:
    """A tool of an MCP server the worker aggregates is listed and called through sbx mcp."""
    from registry.mcp import wire_name

    script = tmp_path / "demo_server.py"
    script.write_text(DEMO_SERVER)
    servers = {"demo": {"name": "Demo", "command": sys.executable, "args": [str(script)]}}
    echo = wire_name("demo", "Demo", "echo")
    with deployment({"mcp_servers": servers}) as dep:
        snapshot = dep.home / "mcp-cache.json"
        listed = "Echo the text back."  # the tool's description, in the worker's snapshot
        wait_until(lambda: snapshot.exists() and listed in snapshot.read_text(), WAIT,
                   "the worker to list the demo server's tools")  # fmt: skip
        async with connect("stdio", dep, "", session()) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await call(client, echo, {"text": "hi"})
    assert echo in names
    assert result["content"] == "echo:hi"


def test_identity_header_forms() -> None:
    import base64

    from worker.mcp_server.identity import AuthError, identity_from_header

    basic = base64.b64encode(b"team:run@1:sbx1.abc").decode()
    assert identity_from_header(f"Basic {basic}").session_id == "team:run@1"
    assert identity_from_header("Bearer s-1/sbx1.abc").token == "sbx1.abc"
    assert "sbx1.abc" not in repr(identity_from_header("Bearer s-1/sbx1.abc"))
    for bad in (None, "", "Basic !!", "Bearer s-1", "Digest x", "Bearer bad id/tok"):
        with pytest.raises(AuthError):
            identity_from_header(bad)


def test_the_client_stays_light() -> None:
    """``import worker.client`` loads no MCP server, no integration, no web stack."""
    code = (
        "import sys, worker.client; print([m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'inspect_ai', 'uvicorn', 'starlette') or "
        "m.startswith(('worker.mcp_server', 'worker.integrations'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"
