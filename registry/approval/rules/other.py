"""Other irreversible or security-relevant operations.

Cloud instance-metadata reads, PowerShell encoded commands, removing or
replacing the crontab, disabling firewalls and mandatory access control,
deleting accounts or their passwords, destroying shell history, and
irreversible publishes to package registries. Same contract as
:mod:`registry.approval.rules`.
"""

from __future__ import annotations

from registry.approval.rules.base import Pattern
from registry.approval.rules.files_delete import RM_NAMES
from registry.approval.rules.paths import mentions_metadata_endpoint
from registry.approval.shell.args import long_flags, operands, short_flags, subcommand, word_set
from registry.approval.shell.dataflow import write_targets
from registry.approval.shell.names import DATA_COMMANDS
from registry.approval.shell.nested import powershell_encoded_payload
from registry.approval.shell.resolve import Cmd

__all__ = ["OTHER_PATTERNS"]

_HISTORY_FILES = word_set(
    """
    .bash_history .zsh_history .history .sh_history .python_history .node_repl_history
    .mysql_history .psql_history .sqlite_history .lesshst .irb_history fish_history .zhistory
    """
)
_IPTABLES = frozenset({"iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy",
                       "iptables-nft", "ebtables", "arptables"})  # fmt: skip
_FIREWALLS = frozenset({"nft", "ufw", "firewall-cmd", "pfctl", "netsh", "set-netfirewallprofile",
                        "setenforce", "aa-teardown"})  # fmt: skip
_ACCOUNTS = frozenset({"userdel", "deluser", "delgroup", "groupdel", "remove-localuser", "passwd",
                       "usermod", "chpasswd", "chage", "pw", "dscl", "net"})  # fmt: skip
_PUBLISHERS: dict[str, frozenset[str]] = {
    "npm": frozenset({"publish", "unpublish", "deprecate"}),
    "yarn": frozenset({"publish"}),
    "pnpm": frozenset({"publish"}),
    "bun": frozenset({"publish"}),
    "twine": frozenset({"upload"}),
    "cargo": frozenset({"publish", "yank"}),
    "gem": frozenset({"push", "yank"}),
    "poetry": frozenset({"publish"}),
    "uv": frozenset({"publish"}),
    "flit": frozenset({"publish"}),
    "hatch": frozenset({"publish"}),
    "pdm": frozenset({"publish"}),
    "mvn": frozenset({"deploy"}),
    "nuget": frozenset({"push", "delete"}),
    "vsce": frozenset({"publish", "unpublish"}),
    "ovsx": frozenset({"publish"}),
    "anaconda": frozenset({"upload"}),
    "dart": frozenset({"pub"}),
    "flutter": frozenset({"pub"}),
    "mix": frozenset({"hex.publish"}),
}


def _cloud_metadata(cmd: Cmd) -> bool:
    if any(mentions_metadata_endpoint(r.target.text) for r in cmd.redirects):
        return True  # e.g. exec 3<>/dev/tcp/169.254.169.254/80
    if cmd.name in DATA_COMMANDS:
        return False
    return mentions_metadata_endpoint("\n".join(cmd.argv))


def _powershell_encoded(cmd: Cmd) -> bool:
    return powershell_encoded_payload(cmd) is not None


def _crontab(cmd: Cmd) -> bool:
    if cmd.name != "crontab":
        return False
    flags = short_flags(cmd.args)
    if "r" in flags:
        return True
    if {"l", "e"} & flags:
        return False
    return bool(operands(cmd.args, frozenset("uc")))  # "crontab FILE|-" replaces it all


def _firewall_disable(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in _IPTABLES:
        if {"F", "X", "Z"} & short_flags(args) or {"flush", "delete-chain"} & long_flags(args):
            return True
        return any(a in ("-P", "--policy") and args[i + 2 : i + 3] == ["ACCEPT"]
                   for i, a in enumerate(args))  # fmt: skip
    if name == "nft":
        words = [a.lower() for a in args if not a.startswith("-")]
        return words[:2] in (["flush", "ruleset"], ["delete", "table"], ["flush", "table"])
    if name == "ufw":
        return subcommand(args)[1] in ("disable", "reset")
    if name == "firewall-cmd":
        return any(a.startswith(("--set-default-zone=trusted", "--panic-off")) for a in args)
    if name == "pfctl":
        return "-d" in args or any(a == "-F" for a in args)
    if name == "netsh":
        lowered = " ".join(a.lower() for a in args)
        return "firewall" in lowered and ("state off" in lowered or " reset" in lowered)
    if name == "set-netfirewallprofile":
        return any(a.lower() in ("false", "$false") for a in args)
    if name == "setenforce":
        return args[:1] in (["0"], ["Permissive"], ["permissive"])
    return name == "aa-teardown"


def _account_destroy(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in ("userdel", "deluser", "delgroup", "groupdel", "remove-localuser"):
        return True
    if name == "passwd":
        return "d" in short_flags(args) or "delete" in long_flags(args)
    if name == "usermod":
        return any(a in ("-p", "--password") for a in args) or "L" in short_flags(args)
    if name in ("chpasswd", "chage"):
        return name == "chpasswd" or "E" in short_flags(args)
    if name == "pw":
        return subcommand(args)[1] in ("userdel", "groupdel")
    if name == "dscl":
        return any(a.lower() == "-delete" for a in args)
    return (
        name == "net"
        and "user" in (a.lower() for a in args)
        and any(a.lower() == "/delete" for a in args)
    )


def _history_off(assignment: str) -> bool:
    name, _, value = assignment.partition("=")
    if name == "HISTFILE":
        return value in ("", "/dev/null")
    return name in ("HISTSIZE", "HISTFILESIZE") and value == "0"


def _history_destroy(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name == "history":
        return "c" in short_flags(args) or ("w" in short_flags(args) and "/dev/null" in args)
    if name == "unset":
        return any(a in ("HISTFILE", "HISTSIZE", "HISTFILESIZE") for a in args)
    if name in ("export", "declare", "typeset", "readonly", "local"):
        return any(_history_off(a) for a in args)
    if name == "set":
        return "+o" in args and "history" in args
    touched = [p for p, _ in write_targets(cmd, include_copies=True)]
    if name in RM_NAMES or name == "ln":
        touched += operands(args)
    return any(p.rstrip("/").rsplit("/", 1)[-1] in _HISTORY_FILES for p in touched)


def _package_publish(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name.startswith("python") and args[:1] == ["-m"] and len(args) > 1:
        name, args = args[1], args[2:]
    if name in ("gradle", "gradlew", "./gradlew"):
        return any(a.startswith("publish") for a in args)
    if name.startswith("python") and args[:1] == ["setup.py"]:
        return "upload" in args
    if name == "dotnet":
        return args[:2] == ["nuget", "push"]
    if name == "yarn" and args[:2] == ["npm", "publish"]:
        return True
    verbs = _PUBLISHERS.get(name)
    if not verbs:
        return False
    verb = subcommand(args)[1]
    if name in ("dart", "flutter"):
        return args[:2] == ["pub", "publish"] and "--dry-run" not in args
    return verb in verbs and "--dry-run" not in args and "-n" not in args


OTHER_PATTERNS: list[Pattern] = [
    Pattern("cloud_metadata", _cloud_metadata, "read a cloud instance-metadata endpoint"),
    Pattern(
        "powershell_encoded",
        _powershell_encoded,
        "PowerShell encoded command (-EncodedCommand)",
        names=frozenset({"powershell", "pwsh", "powershell_ise"}),
    ),
    Pattern(
        "crontab_remove",
        _crontab,
        "remove or replace the user's crontab",
        names=frozenset({"crontab"}),
    ),
    Pattern(
        "firewall_disable",
        _firewall_disable,
        "flush or disable the firewall or mandatory access control",
        names=_IPTABLES | _FIREWALLS,
    ),
    Pattern(
        "account_destroy", _account_destroy, "delete accounts or their passwords", names=_ACCOUNTS
    ),
    Pattern("history_destroy", _history_destroy, "destroy or disable shell history"),
    Pattern("package_publish", _package_publish, "publish to a package registry (irreversible)"),
]
