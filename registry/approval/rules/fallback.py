"""Flat-text fallback patterns for input that does not parse.

Contract: :data:`FLAT_PATTERNS` are ``(key, regex, description)`` applied by the
detector to the normalised, quote-spliced text only when quotes or
substitutions do not balance (bash would reject such input, but a broken
command that still names a dangerous operation asks for approval rather than
slipping through). Keys are the structural matchers' keys. Every repetition is
bounded so the scan stays linear in the text length.
"""

from __future__ import annotations

import re

__all__ = ["FLAT_PATTERNS"]

_FLAT = [
    (
        "recursive_delete",
        r"\brm\s+(?:-[\w-]*\s+)*-[a-zA-Z]*[rR]|\brm\s+[^\n;&|]{0,256}--recursive|\b(?:del|rd|rmdir)\s+[^\n;&|]{0,256}?/s\b|remove-item\s+[^\n;&|]{0,256}-r",
        "recursive delete",
    ),
    (
        "format_filesystem",
        r"\bmkfs\b|\bmkfs\.\w+|\bformat\s+[a-z]:",
        "format a filesystem or wipe a disk (mkfs)",
    ),
    (
        "block_device_write",
        r"\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)|>\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)",
        "write to a raw block device",
    ),
    ("sql_drop", r"\bdrop\s+(?:table|database|schema)\b", "SQL DROP (tables, databases, schemas)"),
    ("sql_truncate", r"\btruncate\s+table\b", "SQL TRUNCATE"),
    (
        "sql_delete_without_where",
        r"\bdelete\s+from\b(?![^;]{0,2000}\bwhere\b)",
        "SQL DELETE without WHERE",
    ),
    (
        "system_config_overwrite",
        r">\s*/etc/|\btee\s+(?:-a\s+)?/etc/",
        "overwrite system configuration or login files",
    ),
    (
        "service_stop",
        r"\b(?:systemctl|service)\s+[^\n;&|]{0,256}\b(?:stop|restart|disable|mask)\b",
        "stop, restart or disable a service",
    ),
    ("kill_all_processes", r"\bkill\s+(?:-\w+\s+)*-1\b", "kill every process (kill -1)"),
    ("mass_kill", r"\bkillall5\b", "kill every process (killall5)"),
    ("fork_bomb", r":\s*\(\s*\)\s*\{", "fork bomb"),
    (
        "remote_code_exec",
        r"\b(?:curl|wget)\b[^\n;&|]{0,256}\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|<\(\s*(?:curl|wget)",
        "run remote content in a shell (curl | sh, bash <(curl ...))",
    ),
    (
        "decoded_code_exec",
        r"\b(?:base64\s+(?:-d|--decode)|xxd\s+-r|openssl\s+[^\n;&|]{0,256}-d)\b[^\n;&|]{0,256}\|\s*(?:ba|z|da|k)?sh\b",
        "run decoded content in a shell (base64 -d | sh)",
    ),
    ("xargs_rm", r"\bxargs\s+[^\n;&|]{0,256}\brm\b", "delete files listed on stdin (xargs rm)"),
    ("find_delete", r"\bfind\b[^\n;&|]{0,256}\s-delete\b", "delete files found by find (-delete)"),
    ("git_reset_hard", r"\bgit\s+[^\n;&|]{0,256}\breset\s+--hard\b", "git reset --hard"),
    (
        "git_force_push",
        r"\bgit\s+[^\n;&|]{0,256}\bpush\b[^\n;&|]{0,256}\s(?:-f|--force)\b",
        "git force push",
    ),
    (
        "cloud_metadata",
        r"169\.254\.169\.254|metadata\.google\.internal|fd00:ec2::254",
        "read a cloud instance-metadata endpoint",
    ),
    (
        "shutdown",
        r"\b(?:shutdown|reboot|poweroff|halt)\b|\b(?:tel)?init\s+[06]\b",
        "shut down, halt or reboot the machine",
    ),
    (
        "powershell_encoded",
        r"\b(?:powershell|pwsh)(?:\.exe)?\s+[^\n;&|]{0,256}-e(?:nc\w*|c)?\s",
        "PowerShell encoded command",
    ),
]
FLAT_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    (key, re.compile(rx, re.IGNORECASE), desc) for key, rx, desc in _FLAT
]
