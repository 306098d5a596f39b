#!/usr/bin/env bash
# sbx's main job on the embedded broker: install into .venv, then `sbx demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/venv.sh
exec .venv/bin/sbx demo "$@"
