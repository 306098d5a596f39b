"""Secrets the process table tests write and expect never to find on disk."""

from __future__ import annotations

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OPENAI = "sk-" + "proj" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"
PASSWORD = "hunter2-Sup3rS3cret"
SECRETS = (GITHUB, OPENAI, PASSWORD)
