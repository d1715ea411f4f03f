#!/usr/bin/env bash
# Recorder figures on the demo suite (make bench; figures, not pass/fail):
#   bytes per step of a recorded trace, replay fidelity (each scripted run recorded twice, every
#   recording replayed: the fraction whose every frame matched at the default tolerance), and replay
#   speed with --fast against the recorded episode time.
# ENVMGR_BENCH_TASKS=N limits the suite to its first N tasks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=$root/bin/envmgr
out=$(mktemp -d /tmp/envmgr-replay-bench.XXXXXX)
export ENVMGR_RUN_DIR=${ENVMGR_RUN_DIR:-$out/run}
E=bench-replay
cleanup() { "$B" down $E >/dev/null 2>&1 || true; rm -rf "$out"; }
trap cleanup EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
"$B" up --name $E >/dev/null
accel=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['accel'])" "$ENVMGR_RUN_DIR/$E/env.json")
# ENVMGR_BENCH_ONLY="id id": just those demo tasks
mapfile -t tasks < <(ls "$root"/tasks/demo/*.json | head -n "${ENVMGR_BENCH_TASKS:-1000}")
if [ -n "${ENVMGR_BENCH_ONLY:-}" ]; then
    mapfile -t tasks < <(for id in $ENVMGR_BENCH_ONLY; do echo "$root/tasks/demo/$id.json"; done)
fi
total=0 reproduced=0 steps=0 bytes=0 rec_s=0 fast_s=0 failed_runs=0 diverged=
for t in "${tasks[@]}"; do
    id=$(basename "$t" .json)
    for k in 1 2; do
        "$B" run "$t" --env $E --agent "$root/tasks/agents/scripted --tasks $t" --out "$out/$id-$k" >/dev/null 2>&1 || true
        [ -f "$out/$id-$k/result.json" ] || { failed_runs=$((failed_runs + 1)); continue; }
        read -r s secs < <(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['actions'], r['timings']['total_s'])" "$out/$id-$k/result.json")
        steps=$((steps + s)); rec_s=$(python3 -c "print($rec_s + $secs)")
        bytes=$((bytes + $(du -sb "$out/$id-$k/trace" | cut -f1)))
        t0=$(date +%s.%N)
        # --task: the operator's task file (tasks reading files of their folder need it)
        if "$B" replay "$out/$id-$k/trace" --env $E --out "$out/$id-$k-replay" --fast --task "$t" >"$out/$id-$k.replay.out" 2>&1; then
            reproduced=$((reproduced + 1))
        else
            diverged="$diverged $id-$k($(grep -m1 -oE 'first divergent step [0-9]+|score: .*MISMATCH|envmgr: .*' "$out/$id-$k.replay.out" | head -c 80))"
        fi
        fast_s=$(python3 -c "print($fast_s + $(date +%s.%N) - $t0)")
        total=$((total + 1))
    done
done
printf '%-44s %-28s [%s]\n' "trace size per step (demo suite)" "$((bytes / (steps > 0 ? steps : 1))) bytes" "$accel"
printf '%-44s %-28s [%s]\n' "replay fidelity (every frame matched)" "$reproduced of $total recordings" "$accel"
[ -z "$diverged" ] || echo "  diverged:$diverged"
[ "$failed_runs" = 0 ] || echo "  recordings that did not finish: $failed_runs"
printf '%-44s %-28s [%s]\n' "replay --fast vs recorded episode time" "$(python3 -c "print('%.1f s vs %.1f s' % ($fast_s, $rec_s))")" "$accel"
