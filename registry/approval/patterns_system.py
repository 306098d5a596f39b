"""Dangerous patterns about the machine rather than files.

Services, process killing, package removal, container lifecycle, cloud
metadata endpoints and PowerShell encoded commands. Same contract as
:mod:`registry.approval.patterns`: ``(key, match, description)`` over one
effective :class:`~registry.approval.commands.Cmd`; keys are stable.
"""

from __future__ import annotations

import re

from registry.approval.commands import (
    DATA_COMMANDS,
    Cmd,
    Pattern,
    operands,
    short_flags,
    subcommand,
    word_set,
)
from registry.approval.paths import mentions_metadata_endpoint

__all__ = ["SYSTEM_PATTERNS", "powershell_encoded_payload"]

# -- services ------------------------------------------------------------------
_SYSTEMCTL_STOP = word_set(
    """
    stop restart try-restart reload-or-restart try-reload-or-restart condrestart force-reload
    disable mask kill isolate emergency rescue freeze clean
    """
)
_SYSTEMCTL_SHORT = frozenset("tpHMnos")
_SYSTEMCTL_LONG = word_set(
    """
    type property host machine lines output signal state root kill-whom job-mode what
    """
)
_SERVICE_VERBS = word_set(
    """
    stop restart force-reload force-stop try-restart condrestart zap disable kill down
    """
)
_LAUNCHCTL_VERBS = frozenset({"unload", "stop", "bootout", "remove", "kill", "disable"})


def _service_stop(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name == "systemctl":
        return subcommand(args, _SYSTEMCTL_SHORT, _SYSTEMCTL_LONG)[1] in _SYSTEMCTL_STOP
    if name in ("service", "rc-service"):
        ops = operands(args)
        return len(ops) >= 2 and ops[1].lower() in _SERVICE_VERBS
    if cmd.argv[0].startswith(("/etc/init.d/", "/etc/rc.d/")):
        return bool(args) and args[0].lower() in _SERVICE_VERBS
    if name in ("sv", "supervisorctl", "initctl", "rc-update", "update-rc.d", "s6-svc"):
        ops = [a.lower() for a in operands(args)]
        return (
            any(v in _SERVICE_VERBS or v in ("del", "remove", "-d") for v in ops[:2])
            or "-d" in args
        )
    if name == "launchctl":
        return bool(args) and args[0].lower() in _LAUNCHCTL_VERBS
    if name in ("stop-service", "restart-service", "suspend-service", "remove-service"):
        return True
    if name == "net":
        return bool(args) and args[0].lower() == "stop"
    if name == "sc":
        return bool(args) and args[0].lower() in ("stop", "delete", "pause", "config")
    return False


# -- processes -------------------------------------------------------------------
def _kill_pids(args: list[str]) -> list[str]:
    i = 0
    if args and args[0] in ("-s", "-n", "--signal"):
        i = 2
    elif args and args[0].startswith("-") and args[0] != "--" and len(args) > 1:
        i = 1
    return [a for a in args[i:] if a != "--"]


def _mass_kill(cmd: Cmd) -> bool:
    name = cmd.name
    if name in ("killall", "killall5", "pkill", "pkill.exe", "skill", "slay"):
        return True
    if name == "taskkill":
        return any(a.lower() in ("/im", "/f", "/t") for a in cmd.args)
    if name == "stop-process":
        return True
    if name == "kill":
        # pid 1 is init (in a container: the container itself); -1 is hardline.
        return any(p in ("1", "-1", "0") for p in _kill_pids(cmd.args))
    return False


# -- packages --------------------------------------------------------------------
_REMOVE_VERBS: dict[str, frozenset[str]] = {
    "apt": frozenset({"remove", "purge", "autoremove", "autopurge"}),
    "apt-get": frozenset({"remove", "purge", "autoremove", "autopurge"}),
    "aptitude": frozenset({"remove", "purge"}),
    "pip": frozenset({"uninstall"}),
    "pipx": frozenset({"uninstall", "uninstall-all"}),
    "uv": frozenset({"uninstall", "remove"}),
    "poetry": frozenset({"remove"}),
    "pipenv": frozenset({"uninstall"}),
    "pdm": frozenset({"remove"}),
    "conda": frozenset({"remove", "uninstall"}),
    "mamba": frozenset({"remove", "uninstall"}),
    "micromamba": frozenset({"remove", "uninstall"}),
    "npm": frozenset({"uninstall", "remove", "rm", "r", "un", "unlink"}),
    "yarn": frozenset({"remove"}),
    "pnpm": frozenset({"remove", "rm", "uninstall", "un"}),
    "bun": frozenset({"remove", "rm"}),
    "gem": frozenset({"uninstall"}),
    "cargo": frozenset({"uninstall"}),
    "brew": frozenset({"uninstall", "remove", "rm", "untap"}),
    "port": frozenset({"uninstall"}),
    "yum": frozenset({"remove", "erase", "autoremove"}),
    "dnf": frozenset({"remove", "erase", "autoremove"}),
    "microdnf": frozenset({"remove"}),
    "tdnf": frozenset({"remove", "erase", "autoremove"}),
    "zypper": frozenset({"remove", "rm"}),
    "apk": frozenset({"del"}),
    "snap": frozenset({"remove"}),
    "flatpak": frozenset({"uninstall", "remove"}),
    "choco": frozenset({"uninstall"}),
    "winget": frozenset({"uninstall", "remove"}),
    "scoop": frozenset({"uninstall"}),
    "pkg": frozenset({"delete", "remove", "uninstall"}),
    "opkg": frozenset({"remove"}),
    "helm": frozenset({"uninstall", "delete"}),
}
_PIP_RE = re.compile(r"^pip\d*(?:\.\d+)*$")


def _package_uninstall(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name.startswith("python") and len(args) >= 2 and args[0] == "-m" and _PIP_RE.match(args[1]):
        name, args = "pip", args[2:]
    if _PIP_RE.match(name):
        name = "pip"
    if name == "uv" and args[:1] == ["pip"]:
        args = args[1:]
    if name in ("dpkg", "rpm"):
        flags = short_flags(args)
        longs = {a.lower() for a in args if a.startswith("--")}
        return bool({"r", "P", "e"} & flags) or bool({"--remove", "--purge", "--erase"} & longs)
    if name in ("pacman", "yay", "paru", "pamac"):
        return any(a.startswith("-R") or a == "--remove" for a in args) or args[:1] == ["remove"]
    if name == "emerge":
        return bool({"C", "c"} & short_flags(args)) or any(
            a in ("--unmerge", "--depclean") for a in args
        )
    if name == "nix-env":
        return "e" in short_flags(args) or "--uninstall" in args
    if name in ("xbps-remove", "pkg_delete"):
        return True
    if name == "conda" and args[:2] == ["env", "remove"]:
        return True
    verbs = _REMOVE_VERBS.get(name)
    if not verbs:
        return False
    ops = [a.lower() for a in operands(args)]
    # The verb is normally first; options with values can push it one further.
    return any(v in verbs for v in ops[:2])


# -- containers ------------------------------------------------------------------
_ENGINES = frozenset({"docker", "podman", "nerdctl", "finch", "lima", "colima"})
_COMPOSE = frozenset({"docker-compose", "podman-compose"})
_ENGINE_SHORT = frozenset("Hcl")
_ENGINE_LONG = word_set(
    """
    host context config log-level tlscacert tlscert tlskey namespace address connection url
    identity root runroot
    """
)
_COMPOSE_SHORT = frozenset("fp")
_COMPOSE_LONG = word_set(
    """
    file project-name env-file profile project-directory parallel ansi progress
    """
)
_LIFECYCLE = frozenset({"stop", "kill", "down", "restart", "rm", "rmi", "prune", "pause"})
_OBJECTS = word_set(
    """
    container containers image images volume network system builder pod machine buildx
    """
)


def _container_lifecycle(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in _COMPOSE:
        return subcommand(args, _COMPOSE_SHORT, _COMPOSE_LONG)[1] in _LIFECYCLE
    if name not in _ENGINES:
        return False
    idx, verb = subcommand(args, _ENGINE_SHORT, _ENGINE_LONG)
    if verb == "compose":
        return subcommand(args[idx + 1 :], _COMPOSE_SHORT, _COMPOSE_LONG)[1] in _LIFECYCLE
    if verb in _OBJECTS:
        sub = subcommand(args[idx + 1 :])[1]
        return sub in _LIFECYCLE or sub in ("remove", "delete")
    return verb in _LIFECYCLE


# -- cloud metadata ----------------------------------------------------------------
def _cloud_metadata(cmd: Cmd) -> bool:
    if any(mentions_metadata_endpoint(r.target.text) for r in cmd.redirects):
        return True  # e.g. exec 3<>/dev/tcp/169.254.169.254/80
    if cmd.name in DATA_COMMANDS:
        return False
    return mentions_metadata_endpoint("\n".join(cmd.argv))


# -- PowerShell ------------------------------------------------------------------
def _is_encoded_flag(arg: str) -> bool:
    if len(arg) < 2 or arg[0] not in "-/":
        return False
    body = arg[1:].lower()
    # -e, -ec and every prefix of -encodedcommand from "en" (PowerShell accepts these).
    return body in ("e", "ec") or (len(body) >= 2 and "encodedcommand".startswith(body))


def powershell_encoded_payload(cmd: Cmd) -> str | None:
    """The base64 argument of ``powershell -EncodedCommand``, if ``cmd`` is one."""
    if cmd.name not in ("powershell", "pwsh", "powershell_ise"):
        return None
    for i, a in enumerate(cmd.args):
        if _is_encoded_flag(a):
            return cmd.args[i + 1] if i + 1 < len(cmd.args) else ""
    return None


def _powershell_encoded(cmd: Cmd) -> bool:
    return powershell_encoded_payload(cmd) is not None


SYSTEM_PATTERNS: list[Pattern] = [
    Pattern("service_stop", _service_stop, "stop, restart or disable a service"),
    Pattern("mass_kill", _mass_kill, "kill processes by name or kill init (killall/pkill/kill 1)"),
    Pattern("package_uninstall", _package_uninstall, "uninstall packages"),
    Pattern(
        "container_lifecycle",
        _container_lifecycle,
        "stop, kill or remove containers (docker/compose stop, kill, down, restart, rm)",
    ),
    Pattern("cloud_metadata", _cloud_metadata, "read a cloud instance-metadata endpoint"),
    Pattern(
        "powershell_encoded", _powershell_encoded, "PowerShell encoded command (-EncodedCommand)"
    ),
]
