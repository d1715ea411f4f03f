#!/usr/bin/env bash
# The step loop (make bench; figures, not pass/fail):
#   - per-step overhead, action answered -> next observation ready, p50/p99, for a click that changes
#     nothing, a key press and typing into a terminal; the guest paused while the agent thinks (the
#     default) and with the task's opt-out (pause_while_thinking: false, the loop before pausing);
#   - what pausing and resuming cost per step, and the CPU of an idle env running and paused;
#   - the late-change probe over the demo suite: observations a frame 2 s later contradicts;
#   - concurrency: N episodes at once with an agent that thinks 5 s per step (STEP_BENCH_CONC,
#     default "20 50 100 150"): steps per minute, p50/p99 step overhead, peak memory.
# STEP_BENCH_STEPS=N steps per overhead task (default 15). STEP_BENCH_SKIP="conc late" skips parts.
# STEP_BENCH_IMAGE=NAME measures another image than desktop (the overhead and idle parts: skip the
# late probe and the concurrency runs, made for the demo tasks); STEP_BENCH_KINDS (default "click key
# typing") and STEP_BENCH_PAUSES (default "false true") pick the overhead rows; STEP_BENCH_IDLE_S the
# idle CPU window (default 20 s).
# STEP_BENCH_LATE_DIR=DIR probes DIR's tasks for late changes instead of the demo suite's, each on an env
# of STEP_BENCH_LATE_IMAGE (e.g. tasks/apps on apps: STEP_BENCH_SKIP="overhead idle conc").
# STEP_BENCH_CONC_STEPS=N steps per concurrent episode (default 6); the second half of each episode
# shows the steady state, once the envs started together no longer compete with each other's boots.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${ENVMGR_BIN:-$root/bin/envmgr} # ENVMGR_BIN: measure another build (a "before" figure)
AGENT=$root/tasks/agents/scripted
work=$(mktemp -d /tmp/envmgr-step-bench.XXXXXX)
export ENVMGR_RUN_DIR=${ENVMGR_RUN_DIR:-$work/run}
E=bench-step
cleanup() { "$B" down $E >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
skip() { [[ " ${STEP_BENCH_SKIP:-} " == *" $1 "* ]]; }
line() { printf '%-44s %-28s [%s]\n' "$1" "$2" "$accel"; }
"$B" up --name $E --image "${STEP_BENCH_IMAGE:-desktop}" >/dev/null
accel=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['accel'].upper())" "$ENVMGR_RUN_DIR/$E/env.json")
n=${STEP_BENCH_STEPS:-15}

# task KIND PAUSE OUT: a task of n steps of one kind
task() {
    python3 - "$1" "$2" "$n" "$3" <<'PY'
import json, sys
kind, pause, n, out = sys.argv[1], sys.argv[2] == "true", int(sys.argv[3]), sys.argv[4]
config, step = [], {
    "click": {"action_type": "CLICK", "x": 1100, "y": 600},
    "key": {"action_type": "PRESS", "key": "shift"},
    "typing": {"action_type": "TYPING", "text": "abc"},
}[kind]
if kind == "typing":
    config = [{"type": "launch", "parameters": {"command": ["xterm", "-geometry", "80x20+40+40"]}},
              {"type": "wait_screen", "parameters": {"timeout": 60, "stable_ms": 1500}}]
json.dump({"id": "step-" + kind, "instruction": "bench", "config": config, "evaluator": {"func": "infeasible"},
           "pause_while_thinking": pause, "limits": {"max_steps": n + 2, "step_timeout_s": 60,
                                                      "episode_timeout_s": 1800},
           "solution": [step] * n + [{"action_type": "DONE"}]}, open(out, "w"))
PY
}
# stats FILE [FROM_STEP]: "p50 p99 count" of the timings lines (all, or from that step of each episode on)
stats() {
    python3 - "$1" "${2:-0}" <<'PY'
import json, sys
v = sorted(j["ms"] for j in map(json.loads, open(sys.argv[1])) if j.get("step", 0) >= int(sys.argv[2]))
pct = lambda p: v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")
print("%.0f %.0f %d" % (pct(50), pct(99), len(v)))
PY
}

if ! skip overhead; then
    for pause in ${STEP_BENCH_PAUSES:-false true}; do
        for kind in ${STEP_BENCH_KINDS:-click key typing}; do
            task $kind $pause "$work/$kind-$pause.json"
            "$B" run "$work/$kind-$pause.json" --env $E --agent "$AGENT --tasks $work/$kind-$pause.json --timings $work/$kind-$pause.jsonl" \
                --out "$work/out-$kind-$pause" >/dev/null 2>&1 || true
            read -r p50 p99 cnt < <(stats "$work/$kind-$pause.jsonl")
            # the first step after the setup runs the guest's input path for the first time since
            # the restore (under TCG: translated anew); the rest show the loop's steady state
            read -r _ r99 _ < <(stats "$work/$kind-$pause.jsonl" 1)
            label=$([ $pause = true ] && echo "paused" || echo "not paused")
            line "step overhead, $kind ($label): p50 / p99" "$p50 / $p99 ms ($cnt steps; p99 from the 2nd step $r99 ms)"
        done
    done
    read -r pauses pms pmax < <(python3 -c "
import json, glob
t = [json.load(open(f))['timings'] for f in glob.glob('$work/out-*-true/result.json')]
n = sum(x['pauses'] for x in t); ms = sum(x['pause_ms'] for x in t)
print(n, '%.2f' % (ms / n if n else float('nan')), '%.1f' % max([x['pause_max_ms'] for x in t] or [float('nan')]))")
    line "pause or resume (QMP stop/cont): mean / max" "$pms / $pmax ms ($pauses calls)"
fi

if ! skip idle; then
    qpid=$(cat "$ENVMGR_RUN_DIR/$E/qemu.pid")
    cpu() { awk '{print $14 + $15}' "/proc/$qpid/stat"; }
    tick=$(getconf CLK_TCK)
    "$B" resume $E >/dev/null
    idle=${STEP_BENCH_IDLE_S:-20}
    c0=$(cpu); sleep "$idle"; c1=$(cpu)
    line "idle env CPU, running ($idle s)" "$(awk "BEGIN {printf \"%.2f %% of a core\", ($c1 - $c0) / $tick / $idle * 100}")"
    "$B" pause $E >/dev/null
    c0=$(cpu); sleep "$idle"; c1=$(cpu)
    line "idle env CPU, paused ($idle s)" "$(awk "BEGIN {printf \"%.2f %% of a core\", ($c1 - $c0) / $tick / $idle * 100}")"
    "$B" resume $E >/dev/null
fi

late_dir=${STEP_BENCH_LATE_DIR:-$root/tasks/demo}
if ! skip late && ls "$late_dir"/*.json >/dev/null 2>&1; then
    obs=0 late=0 live=0 ran=0 missing="" where_late=""
    # the demo tasks on this bench's env; another folder's (STEP_BENCH_LATE_DIR, e.g. tasks/apps) each
    # on an env of its own image (STEP_BENCH_LATE_IMAGE)
    where=(--env $E)
    [ -z "${STEP_BENCH_LATE_IMAGE:-}" ] || where=(--image "$STEP_BENCH_LATE_IMAGE")
    for t in "$late_dir"/*.json; do
        id=$(basename "$t" .json)
        "$B" run "$t" "${where[@]}" --agent "$AGENT --tasks $t" --probe-late 2000 --out "$work/late-$id" >/dev/null 2>&1 || true
        # each change names both frames in the task's trace (its frames/ folder)
        read -r o l v s < <(python3 -c "
import json; p = json.load(open('$work/late-$id/result.json')).get('late_probe', {})
c = p.get('changes', [])
print(p.get('observations', 0), p.get('late_changes', 0), sum(1 for x in c if x['still_changing']),
      ','.join('%d%s' % (x['step'], '(live)' if x['still_changing'] else '') for x in c) or '-')" 2>/dev/null || echo "0 0 0 -")
        obs=$((obs + o)) late=$((late + l)) live=$((live + v))
        [ "$s" = - ] || where_late="$where_late $id:$s"
        if [ -f "$work/late-$id/result.json" ]; then ran=$((ran + 1)); else missing="$missing $id"; fi
    done
    line "late changes (frame 2 s after the observation)" "$late of $obs observations ($ran tasks of $(basename "$late_dir"); $live of them on a screen that changed again 2 s later: live)"
    [ -z "$where_late" ] || echo "  at (task:steps):$where_late"
    [ -z "$missing" ] || echo "  no result (not counted):$missing"
fi
"$B" down $E >/dev/null

if ! skip conc; then
    cn=${STEP_BENCH_CONC_STEPS:-6}
    for c in ${STEP_BENCH_CONC:-20 50 100 150}; do
        suite=$work/conc-$c
        mkdir -p "$suite"
        for i in $(seq 1 "$c"); do
            task click true "$suite/c$i.json"
            python3 - "$suite/c$i.json" "$i" "$cn" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); t["id"] = "conc-%s" % sys.argv[2]
t["solution"] = [t["solution"][0]] * int(sys.argv[3]) + [{"action_type": "DONE"}]
t["limits"]["max_steps"] = int(sys.argv[3]) + 2
json.dump(t, open(sys.argv[1], "w"))
PY
        done
        rm -f "$work/conc-$c.jsonl"
        mem0=$(awk '/MemAvailable/ {print $2}' /proc/meminfo) memmin=$mem0 loadmax=0
        ( while sleep 2; do
              awk '/MemAvailable/ {print "mem", $2}' /proc/meminfo; awk '{print "load", $1}' /proc/loadavg
          done ) >"$work/conc-$c.mon" &
        mon=$!
        t0=$(date +%s.%N)
        "$B" suite run "$suite" --agent "$AGENT --tasks $suite --think 5 --timings $work/conc-$c.jsonl" --envs "$c" \
            --progress plain --out "$work/conc-out-$c" >"$work/conc-$c.log" 2>&1 || true
        t1=$(date +%s.%N)
        kill $mon 2>/dev/null || true
        read -r p50 p99 cnt < <(stats "$work/conc-$c.jsonl")
        read -r q50 q99 qcnt < <(stats "$work/conc-$c.jsonl" 1)
        read -r h50 h99 hcnt < <(stats "$work/conc-$c.jsonl" $((cn / 2)))
        read -r done_ok < <(python3 -c "
import json
print(sum(1 for l in open('$work/conc-out-$c/results.jsonl') if json.loads(l).get('exit_cause') == 'done'))" 2>/dev/null || echo 0)
        read -r memused loadpk < <(awk -v m0="$mem0" '$1 == "mem" && (min == "" || $2 < min) {min = $2}
            $1 == "load" && $2 > l {l = $2} END {printf "%.1f %.1f\n", (m0 - min) / 1048576, l}' "$work/conc-$c.mon")
        steps_min=$(python3 -c "
import json
print('%.0f' % ($cnt / (($t1 - $t0) / 60)))")
        line "$c episodes at once (think 5 s): done" "$done_ok of $c, $(python3 -c "print('%.0f' % ($t1 - $t0))") s wall"
        line "$c episodes at once: step overhead p50 / p99" "$p50 / $p99 ms ($cnt steps)"
        line "$c at once: p50 / p99 after each first step" "$q50 / $q99 ms ($qcnt steps)"
        line "$c at once: p50 / p99 from step $((cn / 2)) on" "$h50 / $h99 ms ($hcnt steps)"
        line "$c episodes at once: steps per minute" "$steps_min (whole run, boot included)"
        line "$c episodes at once: peak memory / load" "$memused GiB / $loadpk"
        rm -rf "$work/conc-out-$c"
    done
fi
