"""Classification of path and host arguments used by the matchers.

Contract: every function takes an argument text after quote removal (``~`` and
``$HOME`` still literal, since the detector never expands them) and answers one
question about it. Answers err on the side of "dangerous" only where the
hardline would otherwise be trivially bypassed (``/etc/../``, ``/e*``,
``//``); ordinary project paths are never system paths.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re

from registry.approval.shell.args import word_set

__all__ = [
    "is_block_device",
    "is_everything_glob",
    "is_hardline_delete_target",
    "is_project_config",
    "is_system_config",
    "is_system_path",
    "mentions_metadata_endpoint",
]

# Top-level directories whose recursive removal destroys the system.
_TOP_SYSTEM = word_set(
    """
    bin boot dev etc home lib lib32 lib64 libx32 opt proc root run sbin srv sys usr var snap mnt
    media System Library Applications Users private Volumes nix
    """
)
_SYSTEM_DIRS = frozenset(
    {f"/{d}" for d in _TOP_SYSTEM}
    | {
        "/usr/bin",
        "/usr/sbin",
        "/usr/lib",
        "/usr/lib32",
        "/usr/lib64",
        "/usr/libexec",
        "/usr/local",
        "/usr/share",
        "/usr/include",
        "/usr/src",
        "/var/lib",
        "/private/etc",
        "/private/var",
        "/System/Library",
        "/usr/local/bin",
        "/usr/local/lib",
        "/etc/ssh",
        "/etc/systemd",
    }
)
_HOME_RE = re.compile(r"^(?:~[A-Za-z0-9_.-]*|\$HOME|\$\{HOME(?:[:?+=-][^}]*)?\})(?P<rest>/.*)?$")
_HOMEDIR_RE = re.compile(r"^/(?:home|Users)/[^/]+$")
# Path suffixes that still mean "the directory itself or everything in it": "/", "/.",
# "/*", "/.*", "/.[!.]*", "/.??*" (a last component made of dots and wildcards only).
_SELF_SUFFIX_RE = re.compile(r"(?:/+(?:\.|[.*?\[\]!^]*[*?][.*?\[\]!^]*)?)+$")
_EVERYTHING_GLOB_RE = re.compile(r"^(?:\.|[.*?\[\]!^]*[*?][.*?\[\]!^]*)$")
_WIN_ROOT_RE = re.compile(
    r"^[A-Za-z]:[\\/]*(?:\*(?:\.\*)?)?$"
    r"|^[A-Za-z]:[\\/]+(?:windows|users|program files(?: \(x86\))?|programdata)"
    r"[\\/]*(?:\*(?:\.\*)?)?$",
    re.IGNORECASE,
)
_SYSTEM_PREFIXES = tuple(
    f"{d}/"
    for d in sorted(_SYSTEM_DIRS)
    if d not in ("/home", "/Users", "/mnt", "/media", "/opt", "/srv", "/Volumes", "/run")
)
_BLOCK_DEVICE_RE = re.compile(
    r"^/dev/(?:(?:s|h|v|xv)d[a-z]+\d*|nvme\d+(?:n\d+(?:p\d+)?)?|mmcblk\d+(?:p\d+)?|md\d+|dm-\d+"
    r"|loop\d+|sr\d+|r?disk\d+(?:s\d+)*|mapper/.+|disk/by-[a-z-]+/.+|mem|kmem|port|root|nbd\d+|zd\d+"
    r"|bcache\d+|rbd\d+|cciss/.+|ram\d+|zram\d+|ubi.+|mtdblock\d+|mtd\d+)$"
)
_SYSTEM_CONFIG_PREFIXES = (
    "/etc/",
    "/boot/",
    "/proc/sys/",
    "/sys/",
    "/var/spool/cron",
    "/lib/systemd/",
    "/usr/lib/systemd/",
    "/private/etc/",
    "/Library/LaunchDaemons/",
    "/Library/LaunchAgents/",
    "/root/.ssh/",
    "/root/.bashrc",
    "/root/.profile",
)
_USER_CONFIG_RE = re.compile(
    r"(?:^|/)\.ssh/[^/]+$|(?:^|/)\.ssh/?$"
    r"|(?:^|/)\.(?:bashrc|bash_profile|bash_login|bash_logout|bash_aliases|profile|zshrc|zprofile"
    r"|zshenv|zlogin|zlogout|cshrc|tcshrc|kshrc|inputrc|pam_environment)$|(?:^|/)\.config/fish/"
    r"|(?:^|/)\.config/(?:systemd|autostart)/|(?:^|/)\.kube/config$"
    r"|(?:^|/)\.aws/(?:credentials|config)$"
    r"|(?:^|/)\.docker/config\.json$|(?:^|/)\.gnupg/"
)
# Files holding secrets or settings that run code, by basename. A project's
# generic config.yaml / settings.json is ordinary work and not listed.
_PROJECT_CONFIG_RE = re.compile(
    r"(?:^|/)(?:\.env(?:\.(?![\w.-]*(?:example|sample|template|dist|defaults?)$)[\w.-]+)?"
    r"|[\w.-]+\.env"
    r"|\.envrc|secrets?\.(?:ya?ml|json|toml|ini|cfg|conf|properties|env)|credentials(?:\.\w+)?"
    r"|\.npmrc|\.pypirc|\.netrc|_netrc|\.yarnrc(?:\.yml)?|\.git/config|\.gitconfig|\.pgpass"
    r"|\.my\.cnf|\.boto|\.s3cfg|\.htpasswd|\.terraformrc|[\w.-]*\.tfstate|\.dockercfg"
    r"|service[-_]account[\w.-]*\.json|kubeconfig|\.git/hooks/[\w.-]+)$"
)
_METADATA_RE = re.compile(
    r"169\.254\.169\.254|169\.254\.170\.2(?![0-9])|metadata\.google\.internal|metadata\.goog(?![a-z])"
    r"|fd00:ec2::254|100\.100\.100\.200|(?<![0-9])2852039166(?![0-9])|0xa9fea9fe|0251\.0376\.0251\.0376"
    r"|::ffff:a9fe:a9fe|instance-data(?:\.ec2\.internal)?(?![\w-])|metadata\.azure\.internal"
    r"|0xa9\.0xfe\.0xa9\.0xfe|169\.254\.43518(?![0-9])",
    re.IGNORECASE,
)


def _canonical(path: str) -> str:
    """Collapse ``//``, ``/./``, ``..`` and trailing ``/``, ``/*``, ``/.`` of an absolute path."""
    stripped = _SELF_SUFFIX_RE.sub("", path)
    if not stripped:
        return "/"
    norm = posixpath.normpath(stripped)
    # normpath keeps a leading "//" (POSIX allows it to be special); Linux does not.
    return "/" + norm.lstrip("/")


def is_everything_glob(component: str) -> bool:
    """True for a path component that matches (nearly) every name: ``*``, ``.*``, ``.[!.]*``."""
    return bool(_EVERYTHING_GLOB_RE.match(component))


def is_hardline_delete_target(path: str) -> bool:
    """True if recursively deleting ``path`` destroys the system or a home directory.

    ``/``, ``/*``, ``//``, ``/etc/..``; top-level system directories and a few
    second-level ones (``/usr/lib``, ``/var/lib``), exactly or with ``/*``;
    ``~``, ``~/``, ``~/*``, ``$HOME``, ``${HOME}``, ``/root``, ``/home``,
    ``/home/<user>``; Windows drive roots and ``C:\\Windows``, ``C:\\Users``.
    A glob in the first component that matches a system directory (``/e*``)
    counts. Subdirectories (``/var/lib/apt/lists/*``, ``~/project``) do not.
    """
    if not path:
        return False
    m = _HOME_RE.match(path)
    if m:
        rest = _SELF_SUFFIX_RE.sub("", m.group("rest") or "")
        return not rest or posixpath.normpath(rest) == "/" or rest.startswith("/..")
    if _WIN_ROOT_RE.match(path):
        return True
    if not path.startswith("/"):
        return False
    canon = _canonical(path)
    if canon == "/" or canon in _SYSTEM_DIRS or _HOMEDIR_RE.match(canon):
        return True
    first = canon[1:].split("/", 1)
    if len(first) == 1 and any(ch in first[0] for ch in "*?["):
        return any(fnmatch.fnmatchcase(d, first[0]) for d in _TOP_SYSTEM)
    return False


_TEMP_PREFIXES = (
    "/var/tmp/",
    "/var/folders/",
    "/private/tmp/",
    "/private/var/folders/",
    "/private/var/tmp/",
)


def is_system_path(path: str) -> bool:
    """True for an absolute path inside a system directory (``/etc/passwd``, ``/usr/bin/x``).

    Temporary directories under system roots (``/var/tmp``) are not system paths.
    """
    if not path.startswith("/"):
        return False
    canon = _canonical(path)
    if (canon + "/").startswith(_TEMP_PREFIXES):
        return False
    return canon == "/" or canon in _SYSTEM_DIRS or canon.startswith(_SYSTEM_PREFIXES)


def is_block_device(path: str) -> bool:
    """True for raw disks/partitions and memory devices (``/dev/sda``, ``/dev/nvme0n1p1``)."""
    if not path.startswith("/dev/"):
        return False
    return bool(_BLOCK_DEVICE_RE.match(posixpath.normpath(path)))


def is_system_config(path: str) -> bool:
    """True for system configuration and login/persistence files.

    ``/etc/*``, ``/boot/*``, ``/proc/sys/*``, ``~/.ssh/authorized_keys``, shell rc files.
    """
    if path.startswith("/"):
        canon = _canonical(path)
        if canon.startswith(_SYSTEM_CONFIG_PREFIXES) or canon in ("/etc", "/boot"):
            return True
    return bool(_USER_CONFIG_RE.search(path))


def is_project_config(path: str) -> bool:
    """True for a project file holding secrets or running code, by basename.

    ``.env``, ``.env.production``, ``.npmrc``, ``.netrc``, ``secrets.yaml``,
    ``credentials``, ``.git/config``, ``.git/hooks/pre-commit``, ``*.tfstate``;
    not ``.env.example``, ``config.yaml.bak`` or a generic ``config.yaml``.
    """
    return bool(_PROJECT_CONFIG_RE.search(path))


def mentions_metadata_endpoint(text: str) -> bool:
    """True if ``text`` names a cloud instance-metadata endpoint (AWS, GCP, Azure, Alibaba, ECS)."""
    return bool(_METADATA_RE.search(text))
