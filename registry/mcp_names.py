"""Model-facing (wire) names of MCP tools: readable, unique, stable, within 64 characters.

``mcp__<server slug>__<tool slug>__<digest>``: the digest is 8 hex characters of
sha256(server_id NUL tool_name), so two tools never share a name and a name never
changes while its server id and tool name stay (whatever the display name's slug
does). Slugs are ``[a-z0-9_]`` with no ``__`` inside, made from the names this way:

* Latin text is ASCII-folded (``Café`` -> ``cafe``);
* Han characters are romanised to pinyin without tones (PyPI's ``pypinyin``,
  installed with ``sbx[mcp]``): ``查询天气`` -> ``cha_xun_tian_qi``;
* text with kana or Hangul is Japanese or Korean, which pinyin would misread: its Han
  characters are not romanised, and what does not fold is dropped;
* a slug left empty is ``server`` / ``tool`` (the digest still tells them apart).

The slugs are cut so the whole name fits :data:`MAX_TOOL_NAME`, the providers' limit.
Without ``pypinyin`` Han text folds to nothing, like kana: the names stay valid but are
not the same as on an installation that has it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

MAX_TOOL_NAME = 64
_DIGEST_LEN = 8
_SCRIPTS = (("CJK UNIFIED IDEOGRAPH", "han"), ("CJK COMPATIBILITY IDEOGRAPH", "han"),
            ("HIRAGANA", "kana"), ("KATAKANA", "kana"), ("HALFWIDTH KATAKANA", "kana"),
            ("HANGUL", "hangul"))  # fmt: skip


def _scripts(text: str) -> set[str]:
    found = set()
    for ch in text:
        if ord(ch) < 0x3000:  # below the CJK blocks: nothing to look up
            continue
        name = unicodedata.name(ch, "")
        found |= {script for prefix, script in _SCRIPTS if name.startswith(prefix)}
    return found


def romanise(text: str) -> str:
    """``text`` with Han characters as space-separated pinyin syllables, unless it holds
    kana or Hangul (or ``pypinyin`` is not installed): then ``text`` unchanged."""
    scripts = _scripts(text)
    if "han" not in scripts or scripts & {"kana", "hangul"}:
        return text
    try:
        from pypinyin import Style, lazy_pinyin
    except ImportError:
        return text
    return " ".join(lazy_pinyin(text, style=Style.NORMAL))


def slug(text: str, fallback: str) -> str:
    """``text`` as ``[a-z0-9_]`` words (see module doc); ``fallback`` when nothing is left."""
    folded = unicodedata.normalize("NFKD", romanise(text)).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "_", folded.lower()).strip("_") or fallback


def wire_name(server_id: str, server_name: str, tool_name: str) -> str:
    """The model-facing name of ``tool_name`` on server ``server_id`` (see module doc)."""
    digest = hashlib.sha256(f"{server_id}\0{tool_name}".encode()).hexdigest()[:_DIGEST_LEN]
    budget = MAX_TOOL_NAME - len("mcp______") - _DIGEST_LEN  # three "__" separators
    server, tool = slug(server_name, "server"), slug(tool_name, "tool")
    server = server[: max(8, budget // 3)].strip("_") or "server"
    tool = tool[: budget - len(server)].strip("_") or "tool"
    return f"mcp__{server}__{tool}__{digest}"
