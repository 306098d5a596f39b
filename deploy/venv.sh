#!/usr/bin/env bash
# Creates .venv with sbx installed (extras given as $1, e.g. "dev,docker,ssh"); idempotent.
# Works on a fresh Debian with Python 3.11: if the venv module lacks ensurepip
# (Debian's python3 without python3-venv), root installs python3-venv first.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null; then
  echo "sbx needs Python 3.11 or newer as $py" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$py" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      sh deploy/apt_install.sh python3-venv
      "$py" -m venv .venv
    else
      echo "python3 -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
fi
spec="."
[ -n "$extras" ] && spec=".[$extras]"
stamp=".venv/.sbx-installed-$(cat pyproject.toml | sha256sum | cut -c1-16)-${extras//,/_}"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
  touch "$stamp"
fi
