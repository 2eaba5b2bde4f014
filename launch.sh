#!/usr/bin/env bash
# Run asyos from this checkout: ./launch.sh [asyos run flags...]
# Uses ./.venv when it exists (made by the README's set-up command), else python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${ASYOS_PYTHON:-python3}"
[ -x "$here/.venv/bin/python" ] && python="$here/.venv/bin/python"
exec "$python" -m asyos.run "$@"
