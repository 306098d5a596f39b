#!/usr/bin/env bash
# sbx's main job on the embedded broker: install into .venv, then `sbx demo`.
# The local backend runs commands in a bubblewrap jail: as root with apt-get, a
# missing bubblewrap is installed first; otherwise it must be there, or the
# operator chooses SBX_LOCAL_ISOLATION=none (no isolation: trusted code only).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SBX_LOCAL_ISOLATION:-bwrap}" != none ] && ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing bubblewrap (the local backend's jail)"
    sh deploy/apt_install.sh --no-install-recommends bubblewrap
  else
    echo "the local backend needs bubblewrap for its jail: apt-get install bubblewrap" >&2
    echo "(or SBX_LOCAL_ISOLATION=none: no isolation, trusted code only)" >&2
    exit 1
  fi
fi
bash deploy/venv.sh
exec .venv/bin/sbx demo "$@"
