#!/usr/bin/env bash
# Run asyos from this checkout, sequentially or as Asy-OS under MPI:
#   ./launch.sh [asyos run flags...]            sequential OS
#   ./launch.sh -n 5 [asyos run flags...]       Asy-OS: 1 server + 4 workers (mpiexec)
# Uses ./.venv when it exists (made by the README's set-up command), else python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${ASYOS_PYTHON:-python3}"
[ -x "$here/.venv/bin/python" ] && python="$here/.venv/bin/python"
if [ "${1:-}" = "-n" ]; then
    ranks="${2:?-n needs a number of MPI ranks}"
    shift 2
    mpiexec="$(dirname "$python")/mpiexec"
    [ -x "$mpiexec" ] || mpiexec="$(command -v mpiexec)"
    exec "$mpiexec" -n "$ranks" "$python" -m asyos.run "$@"
fi
exec "$python" -m asyos.run "$@"
