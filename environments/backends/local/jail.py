"""The local backend's jail: bubblewrap around every session shell and background process.

Each session owns three private directories on the host (``<state_dir>/<key>/``):
``tmp`` (the jail's ``/tmp``), ``home`` (the jail's ``$HOME``) and ``proc`` (its
background processes' output and status files, at the same path inside and
out). Every jailed process -- the session shell, each background process --
is one ``bwrap`` with the same mounts, so all of them see the same files:

* the host read-only as configured (``system``: ``/usr``, ``/etc`` and the
  ``/bin``/``/lib`` links; ``host``: all of ``/`` but ``/run``, ``/var/run``,
  ``/var/tmp``), the workspace and ``binds`` read-write at their own paths;
* a private ``/proc`` (a pid namespace of its own), a minimal ``/dev``;
* the worker's private paths (``hide``: ``SBX_HOME``, spool, sockets) and the
  credential files of ``/etc`` masked wherever a mount would show them, and the
  directories above them that a writable mount shows bound onto themselves: a
  mountpoint cannot be renamed, so nothing masked can be moved out from under its
  mask (see :func:`_guards`);
* a user namespace with every capability dropped and no further user
  namespaces; with network ``none`` a network namespace holding only ``lo``.

A background process's jail runs its wrapper as the namespace's init, in a new
session: the host pid of that init is the process's pid and process group
(PID-safety works on host pids), TERM reaches the command but not the
wrapper, which records the status; when the wrapper ends, the kernel ends
everything left in the namespace. The session's directories
(:mod:`~environments.backends.local.sessiondirs`) go once no jail of it runs.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from environments.backends.local.config import LocalConfig
from environments.backends.local.launch import LAUNCH_ENV, bwrap_binary, environment_options
from environments.backends.local.sessiondirs import SessionDirs, default_state_dir, private_dir
from environments.errors import BackendUnavailable

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""What the ``system`` file system shows of the host (read-only)."""
HOST_PRIVATE_DIRS = ("/run", "/var/run", "/var/tmp")
"""Hidden by the ``host`` file system: they hold the host's sockets (docker, dbus, ...)."""
ETC_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/security/opasswd",
)
"""Credential files of the host masked in every jail (with the ssh host keys)."""


@dataclass(frozen=True)
class Mount:
    """One mount of the jail, in bubblewrap's order."""

    kind: str
    """``ro-bind``, ``bind``, ``symlink``, ``tmpfs``, ``null`` (a masked file), ``proc``,
    ``dev``."""
    dest: str
    source: str = ""

    @property
    def host_backed(self) -> bool:
        """The jail sees a host directory here (read-write or read-only)."""
        return self.kind in ("bind", "ro-bind")

    def args(self) -> list[str]:
        if self.kind in ("bind", "ro-bind", "symlink"):
            return [f"--{self.kind}", self.source, self.dest]
        if self.kind == "tmpfs":
            return ["--tmpfs", self.dest]  # made read-only after the mounts below it
        if self.kind == "null":
            return ["--ro-bind", "/dev/null", self.dest]
        return [f"--{self.kind}", self.dest]


def _under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top.rstrip("/") + "/")


def _real(path: str) -> str:
    return os.path.realpath(path)


def _by_depth(mounts: Iterable[Mount]) -> list[Mount]:
    """``mounts`` with shallower destinations first (stable): a mount never hides a
    deeper one made before it."""
    return sorted(mounts, key=lambda m: m.dest.count("/"))


def _covering(mounts: Iterable[Mount], path: str) -> Mount | None:
    """The mount ``path`` falls in: the last one over it."""
    last: Mount | None = None
    for m in mounts:
        if _under(path, m.dest):
            last = m
    return last


def _guards(mounts: list[Mount], masked: Iterable[str]) -> list[Mount]:
    """Binds of each directory at its own path that keep the ``masked`` host paths where
    they are: every ancestor of a masked path that the jail sees, writable, through a
    bind of the host at its own path (``mounts``, by depth).

    A mask hides a path, not its parents. Were ``ws/state`` (holding a masked
    ``ws/state/.sbx``) renamable in the jail, the sandbox could move it on the host
    through the workspace's bind, and the next jail -- which masks the configured path
    only -- would show the secret at its new name. A mountpoint cannot be renamed or
    removed (``EBUSY``), and a bind of a directory onto itself changes nothing else: it
    stays as writable as it was.
    """
    guards: dict[str, Mount] = {}
    for path in masked:
        ancestor = posixpath.dirname(path)
        while ancestor != "/":
            # Only under a writable bind of the host at its own path (whose top is a
            # mountpoint already) does a rename move the host's directory. Elsewhere it
            # moves nothing of the host's, or fails (EROFS).
            m = _covering(mounts, ancestor)
            if m is not None and m.kind == "bind" and m.source == m.dest != ancestor:
                guards.setdefault(ancestor, Mount("bind", ancestor, ancestor))
            ancestor = posixpath.dirname(ancestor)
    return list(guards.values())


class Jail:
    """The jail of one session: its directories, mounts and bubblewrap command lines.

    ``workspace`` is the host directory bound read-write at its own path (None: none,
    the session starts in its home); ``home`` the path ``$HOME`` has inside. Raises
    :class:`BackendUnavailable` when the layout would expose what it must hide (a
    workspace that is ``/``, ``/tmp``, ``$HOME`` or inside a hidden path) or a bind is
    missing.
    """

    def __init__(
        self, config: LocalConfig, session_id: str, workspace: str | None, home: str
    ) -> None:
        self.config = config
        self.bwrap = bwrap_binary(config.bwrap)
        """bubblewrap, found on the worker's ``PATH`` (never the session's)."""
        state = Path(config.state_dir) if config.state_dir else default_state_dir()
        self.dirs = SessionDirs.create(state, session_id)
        self.home = home if posixpath.isabs(home) and home != "/" else "/home/sbx"
        self.workspace = _real(workspace) if workspace else self.home
        """Where the session starts: the workspace, else its home."""
        self._workspace_bind = workspace is not None
        self.mounts = self._layout()

    # -- layout ------------------------------------------------------------------------

    def _layout(self) -> list[Mount]:
        cfg = self.config
        mounts = self._base()
        binds = [Mount("bind", self.workspace, self.workspace)] if self._workspace_bind else []
        binds += [Mount("bind", p, p) for p in map(_real, cfg.binds)]
        binds += [Mount("ro-bind", p, p) for p in map(_real, cfg.ro_binds)]
        hidden = [_real(p) for p in (*cfg.hide, str(self.dirs.root.parent))]
        for m in binds:
            if not os.path.isdir(m.source):
                raise BackendUnavailable(f"the local jail cannot bind {m.source}: not a directory")
            if m.dest in ("/", "/tmp", self.home):
                raise BackendUnavailable(
                    f"the local jail's workspace or bind {m.dest} would expose the host's "
                    f"{m.dest}: set SBX_LOCAL_CWD to a project directory"
                )
            if any(_under(m.source, h) for h in hidden):
                raise BackendUnavailable(
                    f"the local jail cannot bind {m.source}: it is inside the worker's "
                    "private state (SBX_HOME, spool or sockets)"
                )
        session = [
            Mount("bind", "/tmp", source=str(self.dirs.tmp)),
            Mount("bind", self.home, source=str(self.dirs.home)),
            *binds,
        ]
        masks = [*hidden, *ETC_SECRETS, *sorted(glob.glob("/etc/ssh/ssh_host_*key"))]
        masks = [p for p in dict.fromkeys(masks) if os.path.lexists(p)]
        session += _guards(_by_depth([*mounts, *session]), masks)
        mounts += _by_depth(session)
        # The pty relay is Python: its interpreter must be there, read-only.
        prefix = _real(sys.base_prefix)
        if not self._visible(mounts, prefix):
            mounts.append(Mount("ro-bind", prefix, prefix))
        for path in masks:
            if self._visible(mounts, path):
                kind = "tmpfs" if os.path.isdir(path) and not os.path.islink(path) else "null"
                mounts.append(Mount(kind, path))
        proc = str(self.dirs.proc)
        mounts.append(Mount("bind", proc, proc))
        return mounts

    def _base(self) -> list[Mount]:
        mounts: list[Mount] = []
        if self.config.filesystem == "host":
            mounts.append(Mount("ro-bind", "/", "/"))
            for d in HOST_PRIVATE_DIRS:
                if os.path.isdir(d) and not os.path.islink(d):
                    mounts.append(Mount("tmpfs", d))
        else:
            for d in SYSTEM_DIRS:
                if os.path.islink(d):
                    mounts.append(Mount("symlink", d, source=os.readlink(d)))
                elif os.path.isdir(d):
                    mounts.append(Mount("ro-bind", d, d))
        if self.config.network == "host" and os.path.islink("/etc/resolv.conf"):
            target = os.path.dirname(_real("/etc/resolv.conf"))
            if os.path.isdir(target) and not self._visible(mounts, target):
                mounts.append(Mount("ro-bind", target, target))
        mounts += [Mount("proc", "/proc"), Mount("dev", "/dev")]
        return mounts

    @staticmethod
    def _visible(mounts: Iterable[Mount], path: str) -> bool:
        """Whether host ``path`` shows at its own path in a jail with ``mounts`` so far:
        the last mount over it is a bind of a host directory at its own path."""
        last: Mount | None = None
        for m in mounts:
            if _under(path, m.dest):
                last = m
        return last is not None and last.host_backed and last.source == last.dest

    # -- command lines -----------------------------------------------------------------

    @contextlib.contextmanager
    def command(
        self, *, cwd: str, env: Mapping[str, str], lock_fd: int, info_fd: int | None = None
    ) -> Iterator[tuple[list[str], int]]:
        """``(argv, args_fd)``: the ``bwrap`` command line up to ``--`` and the descriptor
        holding its options (pass it to the process; closed when the block ends). Start
        it with the environment :data:`~environments.backends.local.launch.LAUNCH_ENV`:
        the command gets ``env`` through the options, bubblewrap on the host nothing.

        The command runs as the namespace's init. A session shell's jail (run it under
        :data:`SHELL_INIT`) is in the process group of its bubblewrap process (killing
        that group ends it); with ``info_fd`` it is a background process's: that process
        leads a new session, and bubblewrap writes its host pid to ``info_fd``. The options travel
        through a memfd so that the host paths they name never show in the jail's
        ``/proc/1/cmdline``.
        """
        options = [*namespace_flags(self.config), "--hostname", "sbx"]
        for m in self.mounts:
            options += m.args()
        for m in self.mounts:
            if m.kind == "tmpfs":
                options += ["--remount-ro", m.dest]
        options += environment_options(env)
        options += ["--sync-fd", str(lock_fd), "--chdir", cwd]
        # No --die-with-parent: the kernel ties it to the thread that started the jail,
        # and a worker's threads come and go. A shell's jail ends with its init: when
        # the worker closes it, or when the worker died and its commands ended.
        options.append("--as-pid-1")
        if info_fd is not None:
            options += ["--new-session", "--info-fd", str(info_fd)]
        fd = os.memfd_create("sbx-jail-options", os.MFD_CLOEXEC)
        try:
            os.write(fd, b"".join(o.encode() + b"\0" for o in options))
            os.lseek(fd, 0, os.SEEK_SET)
            yield [self.bwrap, "--args", str(fd), "--"], fd
        finally:
            os.close(fd)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the jail's own ``HOME`` and ``TMPDIR``."""
        return {**env, "HOME": self.home, "TMPDIR": "/tmp"}


SHELL_INIT = r"""
import _signal, _socket, os, sys
sock = _socket.socket(fileno=int(sys.argv[1]))
_, ancillary, _, _ = sock.recvmsg(1, _socket.CMSG_SPACE(8))
data = b"".join(d for level, kind, d in ancillary if kind == _socket.SCM_RIGHTS)
pipes = [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data), 4)]
sock.close()
pid = os.fork()
if pid == 0:
    null = os.open("/dev/null", os.O_RDWR)
    for fd, to in ((pipes[0], 0), (pipes[1], 1), (null, 2)):
        os.dup2(fd, to)
    os.closerange(3, 65536)
    for s in _signal.valid_signals():
        try:
            _signal.signal(s, _signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    _signal.pthread_sigmask(_signal.SIG_SETMASK, ())
    os.execv(sys.argv[2], sys.argv[2:])
null = os.open("/dev/null", os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
for fd in (*pipes, null):
    os.close(fd)
code = 1
while True:
    try:
        done, status = os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if done == pid:
        code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""
"""The init of a session shell's jail: ``python -I -S -c SHELL_INIT SOCKET_FD SHELL ARGS...``.

It receives the shell's stdin and stdout pipes over the socket (so that no other
process -- bubblewrap's own included -- holds them: a dead shell is seen as one,
EPIPE and EOF), runs the shell on them with every signal at its default disposition
and none blocked (Python ignores SIGPIPE and SIGXFSZ, and an ignored signal survives
``exec``: ``yes | head`` would never see SIGPIPE), reaps every process of the jail,
and ends when none is left: a command whose shell died (``kill -9 $$``) still finishes and
reports, as it does without a jail."""


def namespace_flags(config: LocalConfig) -> list[str]:
    """The namespaces and privileges of every jail."""
    flags = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    if _supports(config.bwrap, "--disable-userns"):
        flags.append("--disable-userns")
    if config.network == "none":
        flags.append("--unshare-net")
    return flags


@functools.cache
def _supports(bwrap: str, option: str) -> bool:
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return option in out.stdout


@functools.cache
def probe(config: LocalConfig) -> tuple[bool, str]:
    """Whether a jail can be made here with ``config`` (once per config), and why not."""
    if config.isolation == "none":
        return True, "no isolation (trusted code only)"
    if shutil.which(config.bwrap) is None:
        return False, f"bubblewrap ({config.bwrap}) is not installed (apt-get install bubblewrap)"
    scratch = Path(tempfile.mkdtemp(prefix="sbx-probe-"))
    try:
        workspace = private_dir(scratch / "workspace")
        cfg = config.model_copy(update={"state_dir": str(scratch / "state")})
        jail = Jail(cfg, "probe", str(workspace), "/home/sbx")
        lock = jail.dirs.hold()
        try:
            with jail.command(cwd="/", env={}, lock_fd=lock) as (argv, args_fd):
                proc = subprocess.run(
                    [*argv, "/bin/sh", "-c", "exit 0"], capture_output=True, text=True,
                    timeout=30, pass_fds=(lock, args_fd), env=LAUNCH_ENV,
                )  # fmt: skip
        finally:
            os.close(lock)
    except BackendUnavailable as exc:
        return False, str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap could not run: {exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return False, f"bubblewrap cannot make a jail here: {why[0]}"
    return True, "ok"
