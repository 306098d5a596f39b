#!/bin/sh
# Start a Docker engine for the tests and build the local test images.
#
# Idempotent: installs docker.io when missing (apt, needs root), starts
# `dockerd --bridge=none --iptables=false` in the background when no engine
# answers, waits (bounded) for the socket, then builds images from Debian's
# busybox-static -- no registry can be reached, so nothing is pulled:
#   sbx-test-busybox:latest  only busybox sh and applets, /etc/passwd with nobody
#   sbx-test-bash:latest     the same plus bash (static-ish copy of the host's bash + libs)
#   sbx-test-python:latest   busybox plus the host's python3 (the modules the pty relay needs)
# Exits non-zero (with a reason) when the engine cannot be brought up.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

SOCK=/var/run/docker.sock
LOG=${SBX_DOCKERD_LOG:-/tmp/sbx-dockerd.log}

need_pkg() {
    # $1 = command to look for, $2 = Debian package that provides it
    if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$1" ] && [ ! -e "$3" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "docker.sh: $1 missing and not root: install package $2" >&2
            exit 1
        fi
        sh "$here/../../deploy/apt_install.sh" "$2"
    fi
}

need_pkg dockerd docker.io /usr/sbin/dockerd
need_pkg busybox busybox-static /bin/busybox

engine_up() {
    docker -H "unix://$SOCK" version >/dev/null 2>&1
}

if ! engine_up; then
    # Leftovers of an engine that died (or was killed with the session that started it):
    # an orphaned containerd, and pid files naming processes that are gone or zombies, make
    # the next dockerd wait forever for "its" containerd.
    pkill -9 -f 'containerd --config /var/run/docker/containerd/containerd.toml' 2>/dev/null || true
    pkill -9 -x dockerd 2>/dev/null || true
    rm -f "$SOCK" /var/run/docker.pid /var/run/docker/containerd/containerd.pid \
        /var/run/docker/containerd/containerd.sock /var/run/docker/containerd/containerd-debug.sock
    nohup dockerd --bridge=none --iptables=false --ip6tables=false \
        --host "unix://$SOCK" >"$LOG" 2>&1 &
    i=0
    while ! engine_up; do
        i=$((i + 1))
        if [ "$i" -gt 120 ]; then
            echo "docker.sh: dockerd did not answer within 60 s; see $LOG" >&2
            tail -n 20 "$LOG" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
fi

BUSYBOX=$(command -v busybox || echo /bin/busybox)

build_rootfs() {
    # $1 = directory to fill with a busybox-only root file system
    root=$1
    mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/workspace" "$root/proc" \
        "$root/dev" "$root/sys" "$root/root"
    chmod 1777 "$root/tmp" "$root/workspace"
    cp "$BUSYBOX" "$root/bin/busybox"
    for applet in $("$BUSYBOX" --list); do
        [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' \
        >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

copy_binary() {
    # $1 = root, $2 = a binary on this host, $3 = its path under the root; its shared
    # libraries go along at their host paths (ldd prints them).
    mkdir -p "$1$(dirname "$3")"
    cp "$2" "$1$3"
    for lib in $(ldd "$2" | awk '/\//{for(i=1;i<=NF;i++) if ($i ~ /^\//) print $i}'); do
        mkdir -p "$1$(dirname "$lib")"
        cp -L "$lib" "$1$lib"
    done
}

image_exists() {
    docker image inspect "$1" >/dev/null 2>&1
}

if [ "${SBX_REBUILD_IMAGES:-}" = 1 ] || ! image_exists sbx-test-busybox:latest; then
    tmp=$(mktemp -d)
    build_rootfs "$tmp"
    tar -C "$tmp" -cf - . | docker import \
        --change 'ENV PATH=/bin' --change 'WORKDIR /workspace' --change 'CMD ["sh"]' \
        - sbx-test-busybox:latest >/dev/null
    rm -rf "$tmp"
fi

if [ "${SBX_REBUILD_IMAGES:-}" = 1 ] || ! image_exists sbx-test-bash:latest; then
    tmp=$(mktemp -d)
    build_rootfs "$tmp"
    copy_binary "$tmp" "$(command -v bash)" /bin/bash
    tar -C "$tmp" -cf - . | docker import \
        --change 'ENV PATH=/bin' --change 'WORKDIR /workspace' --change 'CMD ["bash"]' \
        - sbx-test-bash:latest >/dev/null
    rm -rf "$tmp"
fi

if [ "${SBX_REBUILD_IMAGES:-}" = 1 ] || ! image_exists sbx-test-python:latest; then
    # busybox plus the host's python3 with just the modules the pty relay imports (and
    # what the interpreter loads at start): enough for `python3 -I -c RELAY`.
    tmp=$(mktemp -d)
    build_rootfs "$tmp"
    # Debian's interpreter (a pyenv or venv python3 first on PATH may be a shim script).
    py=$(readlink -f /usr/bin/python3 2>/dev/null || true)
    [ -x "$py" ] || py=$(readlink -f "$(command -v python3)")
    copy_binary "$tmp" "$py" /usr/bin/python3
    "$py" -I -c '
import errno, fcntl, os, select, signal, stat, sys, termios, encodings
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if f: print(f)
print(os.path.dirname(encodings.__file__))
' | while read -r f; do
        mkdir -p "$tmp$(dirname "$f")"
        cp -r "$f" "$tmp$f"
    done
    tar -C "$tmp" -cf - . | docker import \
        --change 'ENV PATH=/usr/bin:/bin' --change 'WORKDIR /workspace' --change 'CMD ["sh"]' \
        - sbx-test-python:latest >/dev/null
    rm -rf "$tmp"
fi

echo "docker.sh: engine up at $SOCK; images sbx-test-busybox:latest sbx-test-bash:latest" \
    "sbx-test-python:latest"
