#!/bin/sh
# Build the sbx worker image from this checkout: wheels of sbx and of every dependency
# (pip wheel, by the same Python the image runs: Debian bookworm's python3, so that
# dependencies chosen by version markers match), then deploy/Dockerfile.
#
#   sh deploy/image/build.sh [TAG]            (default tag sbx:latest)
#
# Environment: BASE_IMAGE (default debian:bookworm-slim), SBX_EXTRAS (docker,ssh,flower),
# PYTHON (Debian bookworm's python3, default /usr/bin/python3), SBX_WHEEL_CACHE (where
# wheels and the build venv are kept between builds, keyed by pyproject.toml and the
# extras; default ~/.cache/sbx-wheels).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
tag=${1:-sbx:latest}
base=${BASE_IMAGE:-debian:bookworm-slim}
extras=${SBX_EXTRAS:-docker,ssh,flower}
python=${PYTHON:-/usr/bin/python3}
version=$("$python" -c 'import platform; print(platform.python_version())') || {
    echo "build.sh: no Python at $python: set PYTHON to Debian bookworm's python3" >&2; exit 2; }
root=${SBX_WHEEL_CACHE:-$HOME/.cache/sbx-wheels}
py="$root/venv-$version/bin/python"
[ -x "$py" ] || "$python" -m venv "$root/venv-$version" || {
    echo "build.sh: $python -m venv failed (apt-get install python3-venv)" >&2; exit 2; }

key=$( (cat "$repo/pyproject.toml"; echo "$extras $version") | sha256sum | cut -c1-16)
cache=$root/$key
if [ ! -f "$cache/.complete" ]; then
    mkdir -p "$cache"
    "$py" -m pip wheel -q --disable-pip-version-check --wheel-dir "$cache" "$repo[$extras]"
    rm -f "$cache"/sbx-*.whl
    touch "$cache/.complete"
fi
# Own wheel directory under deploy/ (the build context); sbx itself is built every time.
wheels="$repo/deploy/wheels"
rm -rf "$wheels" && mkdir -p "$wheels"
cp "$cache"/*.whl "$wheels/"
# From a clean copy of the sources: an in-tree build would reuse a stale build/ directory.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT INT TERM
cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/worker" "$repo/environments" \
    "$repo/registry" "$repo/process_registry" "$src/"
find "$src" -name __pycache__ -prune -exec rm -rf {} +
"$py" -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir "$wheels" "$src"
# The classic builder: no buildx plugin is needed (nor used by this Dockerfile).
DOCKER_BUILDKIT=0 docker build -q -t "$tag" --build-arg "BASE_IMAGE=$base" \
    --build-arg "SBX_EXTRAS=$extras" -f "$repo/deploy/Dockerfile" "$repo/deploy" >/dev/null
rm -rf "$wheels"
echo "build.sh: built $tag from $base with sbx[$extras]"
