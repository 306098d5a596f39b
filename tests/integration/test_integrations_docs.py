"""The examples of docs/integrations.md work as written.

* the OpenAI-style tool loop runs against a real worker, with a fake of the OpenAI
  service (a cloud service: the only thing faked) playing a model that calls ``terminal``;
* the Claude Desktop config launches ``sbx mcp`` that the MCP SDK's client talks to;
* the inspect task and the ``sbx.yaml`` fields are what the provider takes.
"""

from __future__ import annotations

import json
import os
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, require_module
from tests.integration.deployment import Deployment, deployment

DOC = (REPO / "docs" / "integrations.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)


@pytest.fixture(scope="module")
def sbx_deployment() -> Iterator[Deployment]:
    with deployment() as running:
        yield running


class _FakeChat:
    """Chat completions as a model would answer: one ``terminal`` call, then text."""

    def __init__(self, seen: list[list[dict[str, Any]]]) -> None:
        self.seen = seen

    def create(self, *, model: str, messages: list[Any], tools: list[Any]) -> Any:
        assert any(t["function"]["name"] == "terminal" for t in tools)
        self.seen.append(list(messages))
        if len(self.seen) == 1:
            call = types.SimpleNamespace(
                id="call_1",
                type="function",
                function=types.SimpleNamespace(
                    name="terminal", arguments='{"command": "echo from-the-sandbox"}'
                ),
            )
            message = _Message(content=None, tool_calls=[call])
        else:
            message = _Message(content="The sandbox said hello.", tool_calls=None)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


class _Message(types.SimpleNamespace):
    def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
        calls = [{"id": c.id, "type": c.type, "function": vars(c.function)}
                 for c in self.tool_calls or []]  # fmt: skip
        dumped = {"role": "assistant", "content": self.content}
        return {**dumped, "tool_calls": calls} if calls else dumped


def test_the_tool_loop_example(
    sbx_deployment: Deployment, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [loop] = [b for b in blocks("python") if "OpenAI()" in b]
    seen: list[list[dict[str, Any]]] = []
    fake = types.ModuleType("openai")
    fake.OpenAI = lambda: types.SimpleNamespace(  # type: ignore[attr-defined]
        chat=types.SimpleNamespace(completions=_FakeChat(seen))
    )
    monkeypatch.setitem(sys.modules, "openai", fake)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    exec(compile(loop, "docs/integrations.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "The sandbox said hello."
    tool_message = seen[1][-1]
    assert tool_message["role"] == "tool"
    result = json.loads(tool_message["content"])
    assert (result["output"], result["exit_code"]) == ("from-the-sandbox\n", 0)


async def test_the_claude_desktop_config(sbx_deployment: Deployment) -> None:
    require_module("mcp", "pip install 'sbx[mcp]'")
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp_types import TextContent

    config = json.loads(blocks("json")[0])["mcpServers"]["sbx"]
    assert config["command"] == "sbx" and config["args"][0] == "mcp"
    sid = config["env"]["SBX_SESSION_ID"]
    # The documented server, on this deployment: its embedded broker, a real token.
    env = sbx_deployment.env(PYTHONPATH=str(REPO), SBX_SESSION_ID=sid,
                             SBX_SESSION_TOKEN=sbx_deployment.token(sid))  # fmt: skip
    documented = [a for a in config["args"] if a not in ("--backend", "docker")]
    args = ["-m", "worker.cli.main", *documented]
    async with Client(StdioServerParameters(command=sys.executable, args=args, env=env)) as mcp:
        result = await mcp.call_tool("terminal", {"command": "echo desktop"})
    [content] = result.content
    assert isinstance(content, TextContent)
    assert json.loads(content.text)["output"] == "desktop\n"


def test_the_inspect_example() -> None:
    require_module("inspect_ai", "pip install 'sbx[inspect]'")
    import yaml

    from worker.integrations.inspect_provider import SbxSandboxConfig

    [task_source] = [b for b in blocks("python") if "@task" in b]
    namespace: dict[str, Any] = {}
    exec(compile(task_source, "docs/integrations.md", "exec"), namespace)
    task = namespace["count_files"]()
    assert task.sandbox.type == "sbx"
    assert task.sandbox.config == SbxSandboxConfig(backend="docker")
    [settings] = blocks("yaml")[-1:]
    assert SbxSandboxConfig.model_validate(yaml.safe_load(settings)).backend == "docker"
