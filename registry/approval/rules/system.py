"""Services, package removal and container lifecycle.

Same contract as :mod:`registry.approval.rules`. Stopping, restarting or
disabling a service needs approval. Uninstalling a *named* package and
stopping or removing a *named* container are everyday work; what needs
approval is removal that reaches beyond names the command spells out
(``apt autoremove``, ``pip uninstall -r reqs.txt``, ``apt purge 'php*'``,
``docker rm -f $(docker ps -aq)``), removing a package the system or the
worker cannot run without (``apt remove libc6``, ``pip uninstall sbx``), and
container operations that destroy data (``docker volume rm``, ``prune``,
``compose down -v``).
"""

from __future__ import annotations

import fnmatch
import re

from registry.approval.rules.base import Pattern
from registry.approval.shell.args import (
    has_long,
    long_flags,
    operands,
    short_flags,
    subcommand,
    word_set,
)
from registry.approval.shell.resolve import Cmd

__all__ = ["SYSTEM_PATTERNS"]

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
}
_PIP_RE = re.compile(r"^pip\d*(?:\.\d+)*$")


_PIP_RE = re.compile(r"^pip\d*(?:\.\d+)*$")
# Packages whose removal breaks the system, the package manager or the worker itself.
_CRITICAL = word_set(
    """
    libc6 libc-bin glibc musl bash dash coreutils sudo systemd systemd-sysv init apt dpkg rpm yum
    dnf apk-tools openssh-server openssh-client util-linux login passwd base-files bsdutils
    python3 python3-minimal perl-base busybox ca-certificates gnupg zlib1g openssl tar gzip
    findutils grep sed mount procps alpine-baselayout debianutils libpam-runtime pip setuptools
    wheel npm node nodejs corepack sbx celery kombu redis docker-ce containerd.io linux linux-lts
    linux-firmware
    """
)
_CRITICAL_GLOBS = ("linux-image*", "linux-headers*", "grub*", "kernel*", "libssl*", "libpam*",
                   "python3.*", "shim*")  # fmt: skip
_ALL_VERBS = frozenset({"autoremove", "autopurge", "uninstall-all", "clean-all"})


def _named_targets_ok(cmd: Cmd, names: list[str]) -> bool:
    """Every removed package is spelled out, known, and not critical."""
    if not names:
        return False
    known = {a for i, a in enumerate(cmd.args) if not cmd.arg_unknown(i)}
    for n in names:
        base = re.split(r"[=<>@~]", n.lower(), maxsplit=1)[0].split(":")[0]
        if n not in known or any(c in n for c in "*?[") or base in _CRITICAL:
            return False
        if any(fnmatch.fnmatchcase(base, g) for g in _CRITICAL_GLOBS):
            return False
    return True


def _removal_targets(cmd: Cmd) -> list[str] | None:
    """Package names a removal command names; None if ``cmd`` removes nothing."""
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
        if {"r", "P", "e"} & flags or {"--remove", "--purge", "--erase"} & longs:
            return operands(args)
        return None
    if name in ("pacman", "yay", "paru", "pamac"):
        if any(a.startswith("-R") or a == "--remove" for a in args) or args[:1] == ["remove"]:
            return [a for a in operands(args) if a != "remove"]
        return None
    if name == "emerge":
        if {"C", "c"} & short_flags(args) or any(a in ("--unmerge", "--depclean") for a in args):
            return [] if "--depclean" in args or "c" in short_flags(args) else operands(args)
        return None
    if name == "nix-env":
        uninstalls = "e" in short_flags(args) or "--uninstall" in args
        return operands(args, frozenset("pf")) if uninstalls else None
    if name in ("xbps-remove", "pkg_delete"):
        return operands(args)
    if name == "conda" and args[:2] == ["env", "remove"]:
        return []
    verbs = _REMOVE_VERBS.get(name)
    if not verbs:
        return None
    ops = operands(args, frozenset("rnpc") if name in ("pip", "conda", "mamba") else frozenset())
    lowered = [a.lower() for a in ops]
    if any(v in _ALL_VERBS for v in lowered[:2]):
        return []
    for k, v in enumerate(lowered[:2]):
        if v in verbs:
            return ops[k + 1 :]
    return None


def _package_uninstall(cmd: Cmd) -> bool:
    targets = _removal_targets(cmd)
    if targets is None:
        return False
    pip_like = "pip" in cmd.name or cmd.args[:1] in (["pip"], ["-m"])
    from_file = pip_like and any(a in ("-r", "--requirement") for a in cmd.args)
    if has_long(cmd.args, "all") or from_file:
        return True
    return not _named_targets_ok(cmd, targets)


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
_OBJECTS = word_set(
    """
    container containers image images volume network system builder pod machine buildx
    """
)


_DATA_VERBS = frozenset({"prune", "reset"})
_NAMED_VERBS = frozenset({"stop", "kill", "rm", "restart", "rmi", "pause", "remove", "delete"})


def _unknown_targets(cmd: Cmd, start: int) -> bool:
    return any(cmd.arg_unknown(i) for i in range(start, len(cmd.args)))


def _compose(cmd: Cmd, args: list[str], offset: int) -> bool:
    idx, verb = subcommand(args, _COMPOSE_SHORT, _COMPOSE_LONG)
    rest = args[idx + 1 :] if idx >= 0 else []
    if verb == "down":
        return "v" in short_flags(rest) or bool({"volumes", "rmi"} & long_flags(rest))
    if verb == "rm":
        return "v" in short_flags(rest) or has_long(rest, "volumes")
    return verb in _NAMED_VERBS and _unknown_targets(cmd, offset + idx + 1)


def _any_container_lifecycle(cmd: Cmd) -> bool:
    """Any stop/kill/remove/restart of containers, named ones included."""
    name, args = cmd.name, cmd.args
    if name in _COMPOSE:
        return subcommand(args, _COMPOSE_SHORT, _COMPOSE_LONG)[1] in _NAMED_VERBS | {"down"}
    if name not in _ENGINES:
        return False
    idx, verb = subcommand(args, _ENGINE_SHORT, _ENGINE_LONG)
    if verb == "compose":
        sub = subcommand(args[idx + 1 :], _COMPOSE_SHORT, _COMPOSE_LONG)[1]
        return sub in _NAMED_VERBS | {"down"}
    if verb in _OBJECTS:
        return subcommand(args[idx + 1 :])[1] in _NAMED_VERBS | _DATA_VERBS
    return verb in _NAMED_VERBS | _DATA_VERBS


_HOST_SOURCES = word_set(
    """
    / /etc /root /home /proc /sys /dev /boot /usr /var/lib/docker /var/run/docker.sock
    /run/docker.sock ~ $HOME
    """
)
_ESCAPE_CAPS = ("SYS_ADMIN", "ALL", "SYS_PTRACE", "SYS_MODULE")


def _mount_sources(args: list[str]) -> list[str]:
    out: list[str] = []
    for i, a in enumerate(args):
        value = None
        if a in ("-v", "--volume", "--mount") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(("--volume=", "--mount=")):
            value = a.split("=", 1)[1]
        elif a.startswith("-v") and len(a) > 2:
            value = a[2:]
        if value is None:
            continue
        if "source=" in value or "src=" in value:
            for part in value.split(","):
                key, _, v = part.partition("=")
                if key in ("source", "src"):
                    out.append(v)
        else:
            out.append(value.split(":", 1)[0])
    return out


def _container_escape(cmd: Cmd) -> bool:
    if cmd.name not in _ENGINES:
        return False
    idx, verb = subcommand(cmd.args, _ENGINE_SHORT, _ENGINE_LONG)
    rest = cmd.args[idx + 1 :]
    if verb == "container" and rest[:1] in (["run"], ["create"]):
        verb, rest = rest[0], rest[1:]
    if verb not in ("run", "create"):
        return False
    if any(a in ("--privileged", "--pid=host", "--userns=host", "--ipc=host") for a in rest):
        return True
    if any(a.startswith("--cap-add") and a.split("=")[-1].upper() in _ESCAPE_CAPS for a in rest):
        return True
    caps = [rest[i + 1].upper() for i, a in enumerate(rest[:-1]) if a == "--cap-add"]
    if any(c in _ESCAPE_CAPS for c in caps):
        return True
    return any(s.rstrip("/") in _HOST_SOURCES or s == "/" for s in _mount_sources(rest))


def _container_lifecycle(cmd: Cmd) -> bool:
    name, args = cmd.name, cmd.args
    if name in _COMPOSE:
        return _compose(cmd, args, 0)
    if name not in _ENGINES:
        return False
    idx, verb = subcommand(args, _ENGINE_SHORT, _ENGINE_LONG)
    rest = args[idx + 1 :]
    if verb == "compose":
        return _compose(cmd, rest, idx + 1)
    if verb in _OBJECTS:
        sub_idx, sub = subcommand(rest)
        if verb in ("volume", "volumes") and sub in ("rm", "remove", "delete", "prune"):
            return True
        if sub in _DATA_VERBS:
            return True
        return sub in _NAMED_VERBS and _unknown_targets(cmd, idx + 1 + sub_idx + 1)
    if verb in _DATA_VERBS:
        return True
    if verb == "rm" and ("v" in short_flags(rest) or has_long(rest, "volumes")):
        return True
    return verb in _NAMED_VERBS and _unknown_targets(cmd, idx + 1)


SYSTEM_PATTERNS: list[Pattern] = [
    Pattern(
        "container_escape",
        _container_escape,
        "run a container with access to the host (--privileged, -v /:/host, docker.sock)",
        names=_ENGINES,
    ),
    Pattern("service_stop", _service_stop, "stop, restart or disable a service"),
    Pattern(
        "package_uninstall",
        _package_uninstall,
        "uninstall packages beyond named ones, or a package the system needs",
        lambda cmd: _removal_targets(cmd) is not None,
    ),
    Pattern(
        "container_lifecycle",
        _container_lifecycle,
        "remove container data, or containers it does not name (volume rm, prune, down -v)",
        _any_container_lifecycle,
        names=_ENGINES | _COMPOSE,
    ),
]
