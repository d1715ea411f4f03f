#!/usr/bin/env bash
# make bench, the setup cache (docs/states.md): episode-ready time, from the reset request until the
# agent has its first observation (POST /v1/envs/{id}/reset, wall time on the client), for tasks
# whose setup runs every time (ENVMGR_SETUP_CACHE=off) and with the cache: the first episode (setup
# runs, its state is saved) and the later ones (restored). Figures, not pass/fail.
#   bench/setup_cache_bench.sh [--repeats N] TASK.json...     (default: two demo tasks)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
repeats=4
[ "${1:-}" = --repeats ] && { repeats=$2; shift 2; }
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=("$root/tasks/demo/terminal-mkdir-tree.json" "$root/tasks/demo/editor-append-line.json")
own_run=
[ -n "${ENVMGR_RUN_DIR:-}" ] || { ENVMGR_RUN_DIR=$(mktemp -d /tmp/envmgr-bench.XXXXXX); own_run=$ENVMGR_RUN_DIR; }
export ENVMGR_RUN_DIR
export ENVMGR_STATE_DIR=$(mktemp -d /tmp/envmgr-bench-states.XXXXXX)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"; "$root/scripts/stop-ram-servers" "$ENVMGR_STATE_DIR"
      rm -rf "$ENVMGR_STATE_DIR" "$tmp" $own_run' EXIT
trap 'exit 130' INT TERM
echo "setup cache: episode ready (reset request to first observation), $repeats episodes a task"
# serve MODE: a server with the setup cache on or off; sets URL
serve() {
    : >"$tmp/serve.out"
    ENVMGR_SETUP_CACHE=$1 "$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out" \
        --task-root / --accel tcg >"$tmp/serve.out" 2>"$tmp/serve.err" &
    pid=$!
    for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.out" && break; sleep 0.2; done
    URL=$(sed -n 's/^envmgr serve: listening on //p' "$tmp/serve.out")
}
stop() { kill "$pid"; wait "$pid"; pid=; }
measure() { # measure TASK: one line of reset wall times (ms), the first first
    PYTHONPATH=$root/clients/python /usr/bin/python3 - "$URL" "$tmp/token" "$1" "$repeats" <<'PY'
import sys, time
from envmgr_client import EnvmgrEnv
url, token, task, n = sys.argv[1], open(sys.argv[2]).read().strip(), sys.argv[3], int(sys.argv[4])
with EnvmgrEnv(url, token, task_config=task) as env:
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        env.reset()
        out.append((time.monotonic() - t0) * 1000)
print(" ".join("%.0f" % v for v in out))
PY
}
p50() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {printf "%.0f", v[int(0.5 * (NR - 1) + 0.5) + 1]}'; }
for task in "${tasks[@]}"; do
    task=$(realpath "$task") # the server resolves it inside --task-root /
    name=$(basename "$task" .json)
    serve off
    off=$(measure "$task"); stop
    serve on
    on=$(measure "$task"); stop
    mib=$("$ENVMGR" state ls --json | /usr/bin/python3 -c "import json, sys
print(' '.join('%.0f MiB, its flat RAM file %.0f' % (s['mib'], s.get('flat_mib', 0))
               for s in json.load(sys.stdin) if s['name'].startswith('setup-')))")
    for s in "$ENVMGR_STATE_DIR"/setup-*; do "$ENVMGR" state rm "$(basename "$s")" >/dev/null; done
    printf '%-44s %-28s [tcg]\n' "$name: setup every time (cache off)" "p50 $(echo "$off" | p50) ms"
    printf '%-44s %-28s [tcg]\n' "  cached: first episode (runs, saves)" "$(echo "$on" | cut -d' ' -f1) ms"
    printf '%-44s %-28s [tcg]\n' "  cached: later episodes (restored)" "p50 $(echo "$on" | cut -d' ' -f2- | p50) ms"
    printf '%-44s %-28s [tcg]\n' "  the cached state on disk" "$mib MiB"
done
