"""Helpers of the tool registry tests."""

from __future__ import annotations

from typing import Any


def schema(desc: str | None = "A tool.", **props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "parameters": {"type": "object", "properties": props, "required": []},
    }
    if desc is not None:
        out["description"] = desc
    return out
