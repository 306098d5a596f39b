#!/bin/sh
# Images the deploy tests need, since no registry image can be pulled here.
#
# A local base image for deploy/Dockerfile:
# Debian bookworm (minbase) made with debootstrap from the Debian mirror this machine's apt
# uses, with the image's OS packages (deploy/image/packages.txt) already in it, imported as
# ${SBX_BASE_IMAGE:-sbx-base:bookworm} -- the Dockerfile's BASE_IMAGE build argument.
#
# Idempotent and cached: an existing image is kept; the root file system's tarball is kept
# under ${SBX_CI_CACHE:-/var/cache/sbx-ci} so a lost image is re-imported in seconds.
# Needs root (debootstrap, the Docker engine). About 2-4 minutes the first time.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tag=${SBX_BASE_IMAGE:-sbx-base:bookworm}
cache=${SBX_CI_CACHE:-/var/cache/sbx-ci}
packages=$(grep -v '^#' "$repo/deploy/image/packages.txt" | tr '\n' ',' | sed 's/,$//')
stamp=$(printf '%s' "$packages" | sha256sum | cut -c1-12)
tarball="$cache/base-bookworm-$stamp.tar"

have_base() {
    docker image inspect "$tag" >/dev/null 2>&1 \
        && [ "$(docker image inspect -f '{{index .Config.Labels "sbx.packages"}}' "$tag")" = "$stamp" ]
}

mirror() {
    # The first Debian archive URI of apt's own configuration (deb822 or one-line format).
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' "$f")
        [ -n "$uri" ] && { echo "$uri"; return; }
    done
    awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null
}

if ! have_base && [ ! -f "$tarball" ]; then
    if ! command -v debootstrap >/dev/null 2>&1; then
        sh "$here/../../deploy/apt_install.sh" debootstrap
    fi
    url=$(mirror)
    [ -n "$url" ] || { echo "deploy_images.sh: no Debian mirror in apt's sources" >&2; exit 1; }
    mkdir -p "$cache"
    root=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT INT TERM
    debootstrap --variant=minbase --include="$packages" bookworm "$root" "$url" \
        >"$cache/debootstrap.log" 2>&1 || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
    # What a slim image leaves out: apt lists and caches, docs, man pages.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
        "$root"/usr/share/man/*
    tar -C "$root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
fi
if ! have_base; then
    docker import --change 'CMD ["bash"]' --change "LABEL sbx.packages=$stamp" \
        "$tarball" "$tag" >/dev/null
    echo "deploy_images.sh: $tag imported from $tarball"
fi

# A Redis image for deploy/compose.yaml's redis service (SBX_REDIS_IMAGE in the tests):
# this machine's redis-server and redis-cli with their libraries, nothing else.
redis_tag=${SBX_CI_REDIS_IMAGE:-sbx-ci-redis:latest}
if ! docker image inspect "$redis_tag" >/dev/null 2>&1; then
    server=$(command -v redis-server) && cli=$(command -v redis-cli) || {
        echo "deploy_images.sh: redis-server and redis-cli are needed (apt-get install redis-server)" >&2
        exit 1; }
    rroot=$(mktemp -d)
    mkdir -p "$rroot/usr/bin" "$rroot/etc" "$rroot/tmp" "$rroot/data"
    chmod 1777 "$rroot/tmp" "$rroot/data"
    for exe in "$server" "$cli"; do
        cp -L "$exe" "$rroot/usr/bin/$(basename "$exe")"
        for lib in $(ldd "$exe" | awk '/\//{for(i=1;i<=NF;i++) if ($i ~ /^\//) print $i}'); do
            mkdir -p "$rroot$(dirname "$lib")"
            cp -L "$lib" "$rroot$lib"
        done
    done
    printf 'root:x:0:0:root:/root:/bin/false\nredis:x:999:999:redis:/data:/bin/false\n' >"$rroot/etc/passwd"
    printf 'root:x:0:\nredis:x:999:\n' >"$rroot/etc/group"
    tar -C "$rroot" -cf - . | docker import --change 'USER 999:999' --change 'WORKDIR /data' \
        --change 'ENV PATH=/usr/bin' --change 'CMD ["redis-server"]' - "$redis_tag" >/dev/null
    rm -rf "$rroot"
    echo "deploy_images.sh: $redis_tag imported"
fi
