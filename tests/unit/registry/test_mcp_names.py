"""Wire names of MCP tools: Han romanised, kana and Hangul by digest, bounded and stable."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from registry.mcp_names import MAX_TOOL_NAME, romanise, slug, wire_name
from tests.helpers import REPO

pytest.importorskip("pypinyin")  # installed with sbx[mcp]
WIRE = re.compile(r"mcp__[a-z0-9]+(?:_[a-z0-9]+)*__[a-z0-9]+(?:_[a-z0-9]+)*__[0-9a-f]{8}\Z")


def test_han_is_romanised_to_pinyin() -> None:
    name = wire_name("weather", "天气服务", "查询天气")
    assert name.startswith("mcp__tian_qi_fu_wu__cha_xun_tian_qi__")
    assert WIRE.match(name)
    assert slug("get天气API", "tool") == "get_tian_qi_api"
    assert slug("银行", "tool") == "yin_hang"  # phrases read as phrases


def test_kana_and_hangul_fall_back_to_server_tool_and_digest() -> None:
    assert wire_name("jp", "天気サーバー", "天気を調べる").startswith("mcp__server__tool__")
    assert wire_name("ko", "날씨", "도구").startswith("mcp__server__tool__")
    assert romanise("天気を調べる") == "天気を調べる"  # Japanese is not read as pinyin
    # Latin words survive beside them, the digest tells the tools apart
    a, b = wire_name("jp", "サーバー", "search を探す"), wire_name("jp", "サーバー", "search 見る")
    assert a.startswith("mcp__server__search__") and a != b


def test_names_fit_the_limit_and_are_unique_per_server_and_tool() -> None:
    long_han = "数据库查询" * 30
    names = {wire_name(f"s{i}", long_han, long_han + str(i)) for i in range(50)}
    assert len(names) == 50
    for name in names:
        assert len(name) <= MAX_TOOL_NAME and WIRE.match(name), name


def test_names_are_the_same_in_another_process() -> None:
    code = ("from registry.mcp_names import wire_name; "
            "print(wire_name('weather', '天气服务', '查询天气'))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=60).stdout.strip()  # fmt: skip
    assert out == wire_name("weather", "天气服务", "查询天气")
