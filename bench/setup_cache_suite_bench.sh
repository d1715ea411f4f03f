#!/usr/bin/env bash
# make bench with ENVMGR_BENCH_APPS_SUITE=1 (opt-in: about 40 min under TCG): the setup cache on a
# suite (docs/states.md). Ten apps tasks (Calc, Chromium, GIMP, Impress, Thunderbird, VLC, Writer),
# each repeated 5 times, `envmgr suite run` with the null agent (DONE at once, so the wall time is
# resets, setups and evaluations), 1 env, TCG, the apps image: once with ENVMGR_SETUP_CACHE=off and
# once with the cache on (an empty state folder: each task's first episode runs its setup and saves
# it, the 4 others restore it). Prints both wall times, their ratio, and whether every episode's
# score is the same in both runs. Figures, not pass/fail.
#   bench/setup_cache_suite_bench.sh [--repeat N] [--agent CMD] [--keep DIR] [TASK.json...]
# --keep DIR: the runs' folders (out-off, out-on: results.jsonl, traces) go in DIR and stay.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
repeat=5 agent=$root/tasks/agents/null keep=
while [ $# -gt 0 ]; do
    case $1 in
        --repeat) repeat=$2; shift 2 ;;
        --agent) agent=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        -*) echo "usage: setup_cache_suite_bench.sh [--repeat N] [--agent CMD] [--keep DIR] [TASK.json...]" >&2; exit 2 ;;
        *) break ;;
    esac
done
tasks=("$@")
if [ ${#tasks[@]} -eq 0 ]; then
    for t in calc-add-row calc-sum-formula chrome-new-tab chrome-open-url gimp-flip-horizontal impress-new-slide \
        thunderbird-address-book vlc-pause writer-append-paragraph writer-bold-first-line; do
        tasks+=("$root/tasks/apps/$t.json")
    done
fi
if [ -n "$keep" ]; then
    mkdir -p "$keep" && work=$(mktemp -d "$keep/run.XXXXXX") || exit 1
else
    work=$(mktemp -d /tmp/envmgr-cache-suite.XXXXXX) || exit 1
    trap '"$root/scripts/stop-ram-servers" "$work"; rm -rf "$work"' EXIT
fi
trap 'exit 130' INT TERM
# the suite: a folder with copies of the tasks and of the files they upload (local_path is resolved
# inside the task's own folder)
mkdir "$work/apps"
for t in "${tasks[@]}"; do
    cp "$t" "$work/apps/" || exit 1
    [ -d "$(dirname "$t")/files" ] && [ ! -e "$work/apps/files" ] && cp -r "$(dirname "$t")/files" "$work/apps/"
done
n=$("$ENVMGR" suite list "$work/apps" --image apps | wc -l)
echo "setup cache on a suite: $n apps tasks x $repeat, agent $(basename "${agent%% *}"), 1 env, TCG, image apps"
# run MODE: the suite with the setup cache MODE (off, on) in a state folder of its own; prints its wall s
run() {
    mkdir -p "$work/states-$1"
    local t0=$(date +%s.%N)
    ENVMGR_SETUP_CACHE=$1 ENVMGR_STATE_DIR=$work/states-$1 "$ENVMGR" suite run "$work/apps" --agent "$agent" \
        --out "$work/out-$1" --envs 1 --accel tcg --image apps --repeat "$repeat" --progress plain \
        >"$work/run-$1.log" 2>&1 || { echo "setup cache suite bench: the run with the cache $1 failed:" >&2;
                                      tail -5 "$work/run-$1.log" >&2; }
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }'
}
off=$(run off)
on=$(run on)
row() { printf '%-44s %-28s [tcg]\n' "$1" "$2"; }
row "apps suite, setup every time (cache off)" "$off s"
restored=$(grep -rls '"used": *"restored"' "$work/out-on/traces" 2>/dev/null | sed -E 's|(/rep-[0-9]+)/.*|\1|' | sort -u | wc -l)
row "apps suite, setup cache on" "$on s ($restored episodes' setups restored)"
row "  wall time, off / on" "$(awk -v a="$off" -v b="$on" 'BEGIN { printf "%.2fx", (b > 0 ? a / b : 0) }')"
/usr/bin/python3 - "$work/out-off/results.jsonl" "$work/out-on/results.jsonl" <<'PY'
import json, sys
def scores(path):
    out = {}
    try:
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("final"):
                out[(r["task_id"], r["repeat"])] = (r.get("score"), r.get("status"), r.get("exit_cause"))
    except OSError:
        pass
    return out
off, on = scores(sys.argv[1]), scores(sys.argv[2])
same = [k for k in off if on.get(k) == off[k]]
diff = sorted(k for k in set(off) | set(on) if on.get(k) != off.get(k))
mean = lambda d: sum(v[0] or 0 for v in d.values()) / len(d) if d else 0
print("%-44s %-28s [tcg]" % ("  scores, off and on", "%d of %d episodes equal (mean %.2f / %.2f)"
                              % (len(same), len(set(off) | set(on)), mean(off), mean(on))))
for k in diff[:10]:
    print("    differs: %s rep %s: off %s, on %s" % (k[0], k[1], off.get(k), on.get(k)))
PY
