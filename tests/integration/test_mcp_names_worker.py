"""MCP tools named in Chinese and Japanese, served by a real ``sbx worker``: Han romanised
to pinyin, kana by server/tool plus digest; the same names after a worker restart."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from registry.mcp_names import MAX_TOOL_NAME, wire_name
from tests.fixtures_workers import settings_for
from tests.helpers import require_module, wait_until
from tests.integration.test_mcp_worker import tools_json, write_config
from worker.client import SandboxClient

require_module("mcp", "pip install 'sbx[mcp]'")
require_module("pypinyin", "pip install 'sbx[mcp]'")

WAIT = 120.0  # an upper bound for a condition, not a timing assertion

SERVER = '''
from mcp.server.mcpserver import MCPServer

app = MCPServer("weather")

@app.tool(name="查询天气")
def query(city: str) -> str:
    """Weather of a city."""
    return "晴 in " + city

@app.tool(name="天気を調べる")
def shiraberu(city: str) -> str:
    """Weather of a city, in Japanese."""
    return "晴れ in " + city

if __name__ == "__main__":
    app.run()
'''

HAN = wire_name("weather", "天气服务", "查询天气")
KANA = wire_name("weather", "天气服务", "天気を調べる")


def test_han_tools_get_pinyin_names_that_survive_a_restart(
    sbx_home: Path, start_worker: Any, tmp_path: Path
) -> None:
    assert HAN.startswith("mcp__tian_qi_fu_wu__cha_xun_tian_qi__")
    assert KANA.startswith("mcp__tian_qi_fu_wu__tool__")
    assert max(len(HAN), len(KANA)) <= MAX_TOOL_NAME
    script = tmp_path / "weather.py"
    script.write_text(SERVER)
    write_config(sbx_home, {"weather": {"name": "天气服务", "command": sys.executable,
                                        "args": [str(script)], "timeout": 60}})  # fmt: skip
    worker = start_worker(None)
    wait_until(lambda: {HAN, KANA} <= set(tools_json(sbx_home)), WAIT,
               "the romanised names in `sbx tools`")  # fmt: skip
    settings = settings_for(sbx_home, None)
    with SandboxClient(session_id="mcp-han", settings=settings) as client:
        han = json.loads(client.tool_call(HAN, {"city": "北京"}))
        kana = json.loads(client.tool_call(KANA, {"city": "東京"}))
    assert (han["content"], kana["content"]) == ("晴 in 北京", "晴れ in 東京")

    worker.stop()
    start_worker(None)  # the names come from the snapshot at once, and are the same
    assert {HAN, KANA} <= set(tools_json(sbx_home))
    with SandboxClient(session_id="mcp-han", settings=settings) as client:
        again = json.loads(client.tool_call(HAN, {"city": "上海"}))
    assert again["content"] == "晴 in 上海"
