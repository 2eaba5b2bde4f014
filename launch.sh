#!/usr/bin/env bash
# Run asyos from this checkout: sequential OS, Asy-OS under MPI, or Asy-OS over ZeroMQ.
#
#   ./launch.sh [asyos run flags...]           sequential OS
#   ./launch.sh -n 5 [asyos run flags...]      Asy-OS: 1 server + 4 workers (mpiexec)
#                                              (Ctrl-C / SIGTERM: exit 130 / 143; no file left
#                                              in /dev/shm or /tmp: docs/reliability.md)
#   ./launch.sh --zmq Q [--port P] [--hosts FILE] [--keys DIR] [--] [flags...]
#                                              Asy-OS over ZeroMQ: 1 server + Q workers
#   ./launch.sh -h                             this text
# The flags: python -m asyos.run -h, python -m asyos.server -h, python -m asyos.worker -h.
#
# ZeroMQ mode (bash >= 4.3): the server `python -m asyos.server` binds
# tcp://127.0.0.1:P (default port 5555) and the Q workers `python -m asyos.worker`, one
# per shard t/Q, run on this machine.  The flags go to the server; the ones that
# describe the data also go to every worker:
#   server and workers:  -p/--features  -s/--sparsity  --seed  --synthetic  --keys
#                        --resend-after  -v/--verbose
#   workers only:        --data  --dtype  --degree  --shuffle  --heartbeat-every  --server-timeout
#                        --blas-threads (default on this machine: its cores / Q)
#   server only:         everything else (--labels, --out, --checkpoint, --quiet, ...)
# Write these flags in full, as `--flag VALUE`, `--flag=VALUE` or `-pVALUE`; launch.sh
# sets --bind, --workers, --connect and --shard itself.  `--` ends launch.sh's own
# options.  Run from the checkout's root or give absolute paths.  Example:
#   ./launch.sh --zmq 4 --data X.npy --labels y.npy -s 64 --out results.json
#
# --hosts FILE (one [user@]host per line, `#` comments; see deploy/hosts.example): the
# server binds tcp://0.0.0.0:P, so --keys DIR is required, and worker t runs on host
# number t mod (number of hosts) as
#   ssh HOST 'cd REPO && .venv/bin/python -m asyos.worker --connect tcp://SERVER:P ...'
# REPO is $ASYOS_REMOTE_DIR, else this checkout's path: the checkout, its .venv, the
# data and the keys must exist there on every host (deploy/README.md).  SERVER is
# $ASYOS_SERVER_HOST, else this machine's first `hostname -I` address, else
# `hostname -f`.  ssh runs with BatchMode (set up keys, no password prompts).
#
# Stopping: when any process exits non-zero, the others get SIGTERM and launch.sh exits
# with that status; Ctrl-C or SIGTERM stop them all (the server writes its --checkpoint
# first).  Otherwise launch.sh waits for the server and every worker and exits 0.
# Stopping a remote worker kills only its ssh client (no tty): the worker itself gives
# up once the server is silent for --server-timeout seconds (default 120).
#
# Python: $ASYOS_PYTHON when set, else ./.venv/bin/python (made by the README's set-up
# command), else python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${ASYOS_PYTHON:-}" ]; then
    python="$ASYOS_PYTHON"
elif [ -x "$here/.venv/bin/python" ]; then
    python="$here/.venv/bin/python"
else
    python=python3
fi

usage() {
    sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"
}

die() {
    echo "launch.sh: $*" >&2
    exit 2
}

# POSIX single quotes, so that ssh's remote shell sees each argument unchanged.
quote() {
    local arg
    for arg in "$@"; do
        printf "'%s' " "${arg//\'/\'\\\'\'}"
    done
}

# Stop every child still running and reap it (the server checkpoints on SIGTERM).
stop_children() {
    local running
    running="$(jobs -pr)"
    if [ -n "$running" ]; then
        # shellcheck disable=SC2086  # one PID per word
        kill -TERM $running 2>/dev/null || true
        wait 2>/dev/null || true
    fi
}

zmq() {
    if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 3))); then
        die "--zmq needs bash >= 4.3 (wait -n); this is bash $BASH_VERSION"
    fi
    local q="${1:-}" port=5555 hosts_file="" keys="" own_options=1
    [[ "$q" =~ ^[1-9][0-9]*$ ]] || die "--zmq needs a number of workers Q >= 1, got '$q'"
    shift
    # Both arrays start non-empty: "${a[@]}" of an empty array fails under set -u in bash 4.3.
    local server=(-m asyos.server --workers "$q") worker=(-m asyos.worker)
    local arg name value forward words
    while (($#)); do
        arg="$1"
        shift
        [[ "$arg" != -h && "$arg" != --help ]] || { usage; exit 0; }
        if ((own_options)); then
            case "$arg" in
                --) own_options=0; continue ;;
                --port) (($#)) || die "--port needs a value"; port="$1"; shift; continue ;;
                --port=*) port="${arg#*=}"; continue ;;
                --hosts) (($#)) || die "--hosts needs a file"; hosts_file="$1"; shift; continue ;;
                --hosts=*) hosts_file="${arg#*=}"; continue ;;
            esac
        fi
        # forward: s = server only, w = workers only, sw = both.
        case "$arg" in
            --bind | --bind=* | --workers | --workers=* | --connect | --connect=* | --shard | --shard=*)
                die "${arg%%=*} is set by launch.sh (use --zmq Q and --port P)" ;;
            --data | --dtype | --degree | --heartbeat-every | --server-timeout | --blas-threads)
                forward=w value=1 ;;
            --data=* | --dtype=* | --degree=* | --heartbeat-every=* | --server-timeout=* | \
                --blas-threads=* | --shuffle)
                forward=w value=0 ;;
            -p | --features | -s | --sparsity | --seed | --synthetic | --keys | --resend-after)
                forward=sw value=1 ;;
            -p?* | -s?* | --features=* | --sparsity=* | --seed=* | --synthetic=* | --keys=* | \
                --resend-after=* | -v | --verbose)
                forward=sw value=0 ;;
            --?*)
                # argparse accepts abbreviations, but only the server would get them.
                for name in --data --dtype --degree --shuffle --heartbeat-every --server-timeout \
                    --blas-threads --features --sparsity --seed --synthetic --keys --resend-after --verbose; do
                    [[ "$name" != "${arg%%=*}"* ]] || die "write $name in full: launch.sh forwards it to the workers"
                done
                forward=s value=0 ;;
            *) forward=s value=0 ;;
        esac
        words=("$arg")
        if ((value)); then
            (($#)) || die "$arg needs a value"
            words+=("$1")
            shift
        fi
        case "$arg" in
            --keys) keys="${words[1]}" ;;
            --keys=*) keys="${arg#*=}" ;;
        esac
        [[ "$forward" != *s* ]] || server+=("${words[@]}")
        [[ "$forward" != *w* ]] || worker+=("${words[@]}")
    done
    if ! [[ "$port" =~ ^[1-9][0-9]*$ ]] || ((port > 65535)); then
        die "--port must be a TCP port (1-65535), got '$port'"
    fi
    [ -z "$keys" ] || [ -d "$keys" ] || die "--keys $keys: no such directory (make one with \`asyos keys DIR\`)"

    local hosts=() line host server_host="127.0.0.1"
    if [ -n "$hosts_file" ]; then
        [ -n "$keys" ] || die "--hosts binds the server to 0.0.0.0: give --keys DIR (make it with \`asyos keys DIR\` and copy it to every host)"
        [ -f "$hosts_file" ] || die "--hosts $hosts_file: no such file"
        while IFS= read -r line || [ -n "$line" ]; do
            read -r host _ <<<"${line%%#*}" || true
            [ -z "$host" ] || hosts+=("$host")
        done <"$hosts_file"
        ((${#hosts[@]})) || die "--hosts $hosts_file: no hosts in it"
        server_host="${ASYOS_SERVER_HOST:-}"
        if [ -z "$server_host" ]; then
            # An address needs no DNS on the workers; hostname -I is Linux only.
            read -r server_host _ <<<"$(hostname -I 2>/dev/null || true)" || true
            [ -n "$server_host" ] || server_host="$(hostname -f)"
        fi
        server+=(--bind "tcp://0.0.0.0:$port")
    else
        server+=(--bind "tcp://127.0.0.1:$port")
    fi
    worker+=(--connect "tcp://$server_host:$port")

    # Workers on this machine share its cores for BLAS, unless --blas-threads was given.
    local local_threads=()
    [[ " ${worker[*]} " == *" --blas-threads"* ]] ||
        local_threads=(--blas-threads "$(( $(nproc) / q > 0 ? $(nproc) / q : 1 ))")
    trap stop_children EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    "$python" "${server[@]}" &
    local t remote_dir="${ASYOS_REMOTE_DIR:-$here}"
    for ((t = 0; t < q; t++)); do
        if ((${#hosts[@]})); then
            host="${hosts[t % ${#hosts[@]}]}"
            echo "launch.sh: shard $t/$q on $host" >&2
            ssh -n -o BatchMode=yes "$host" \
                "cd $(quote "$remote_dir") && .venv/bin/python $(quote "${worker[@]}" --shard "$t/$q")" &
        else
            "$python" "${worker[@]}" ${local_threads[@]+"${local_threads[@]}"} --shard "$t/$q" &
        fi
    done
    # One `wait -n` per child (server + q workers), in the order they exit.
    local status
    for ((t = 0; t <= q; t++)); do
        status=0
        wait -n || status=$?
        if ((status)); then
            echo "launch.sh: a process exited with status $status; stopping the others" >&2
            exit "$status"
        fi
    done
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    --zmq) shift; zmq "$@"; exit 0 ;;
esac
if [ "${1:-}" = "-n" ]; then
    ranks="${2:?-n needs a number of MPI ranks}"
    shift 2
    mpiexec="$(dirname "$python")/mpiexec"
    [ -x "$mpiexec" ] || mpiexec="$(command -v mpiexec)"
    exec "$mpiexec" -n "$ranks" "$python" -m asyos.run "$@"
fi
exec "$python" -m asyos.run "$@"
