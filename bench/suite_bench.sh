#!/usr/bin/env bash
# Suite figures (make bench runs this after envbench): wall time of the demo
# suite with the scripted agent at N = 1, 2, 4 envs and the speed-up per env,
# peak RSS and PSS per env during the runs, and how many idle desktop envs
# this host holds before memory runs short. Figures, not pass/fail; each line
# names KVM or TCG.
#   SUITE_BENCH_SUITE=DIR   the suite (default tasks/demo when it has tasks, else tests/data/suite)
#   SUITE_BENCH_ENVS="1 2 4" the env counts to time
#   SUITE_BENCH_IDLE=12     idle envs to hold at once (the capacity is extrapolated from them)
#   SUITE_BENCH_ACCEL=auto  auto, kvm or tcg
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
envmgr=${ENVMGR_BIN:-$root/bin/envmgr}
agent=$root/tasks/agents/scripted
suite=${SUITE_BENCH_SUITE:-}
if [ -z "$suite" ]; then
    if ls "$root"/tasks/demo/*.json >/dev/null 2>&1; then suite=$root/tasks/demo; else suite=$root/tests/data/suite; fi
fi
accel=${SUITE_BENCH_ACCEL:-auto}
work=$(mktemp -d /tmp/envmgr-suite-bench.XXXXXX)
export ENVMGR_RUN_DIR=${ENVMGR_RUN_DIR:-$work/run}
idle_names=()
finish() {
    for n in "${idle_names[@]}"; do "$envmgr" down "$n" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped

line() { printf '%-44s %-28s [%s]\n' "$1" "$2" "$3"; }
mem_avail_mib() { awk '/MemAvailable/ {printf "%d", $2 / 1024}' /proc/meminfo; }
ntasks=$("$envmgr" suite list "$suite" | wc -l)
name=$(basename "$suite")
echo "suite benchmark: $name ($ntasks tasks), scripted agent, $(nproc) cores, $(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576)) GiB"

# --- wall time at N envs ------------------------------------------------------------
base=""
label=""
for n in ${SUITE_BENCH_ENVS:-1 2 4}; do
    out=$work/run-$n
    if ! "$envmgr" suite run "$suite" --agent "$agent --tasks $suite" --envs "$n" --accel "$accel" --progress plain --out "$out" \
        >"$work/run-$n.log" 2>&1; then
        echo "suite run at $n envs failed:"; tail -5 "$work/run-$n.log"; exit 1
    fi
    read -r wall pass rss pss acc < <(python3 -c "
import json; s = json.load(open('$out/summary.json')); r = s['resources']
print('%.1f %.0f %.0f %.0f %s' % (s['wall_s'], 100 * s['all']['pass_rate'], r['peak_rss_mib'], r['peak_pss_mib'], s['accel'].upper()))")
    label=$acc
    [ -n "$base" ] || base=$wall
    speed=$(awk "BEGIN {printf \"%.2f\", $base / $wall}")
    per=$(awk "BEGIN {printf \"%.2f\", $base / $wall / $n}")
    line "suite $name, $n env(s): wall" "${wall} s (pass ${pass}%)" "$acc"
    line "suite $name, $n env(s): speed-up vs 1 env" "${speed}x (${per}x per env)" "$acc"
    line "suite $name, $n env(s): peak RSS / PSS per env" "${rss} / ${pss} MiB" "$acc"
done

# --- idle envs the host holds ------------------------------------------------------------
# Hold M idle envs at once (all must answer a screenshot), measure each QEMU's
# PSS and USS (private memory: what one more env costs; the golden RAM file
# pages they share are counted once) and CPU, and extrapolate.
m=${SUITE_BENCH_IDLE:-12}
before=$(mem_avail_mib)
t0=$(date +%s.%N)
for i in $(seq 1 "$m"); do
    n=bench-idle-$$-$i
    "$envmgr" up --name "$n" --accel "$accel" >/dev/null 2>&1 || { echo "up $n failed"; exit 1; }
    idle_names+=("$n")
done
t1=$(date +%s.%N)
sleep 30 # the restored guests settle (timers run, pages are touched)
cpu_ticks() { local t=0 n pid; for n in "${idle_names[@]}"; do
    pid=$(cat "$ENVMGR_RUN_DIR/$n/qemu.pid"); t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo $t; }
c0=$(cpu_ticks)
sleep 30
c1=$(cpu_ticks)
alive=0
for n in "${idle_names[@]}"; do "$envmgr" screenshot "$n" "$work/shot.png" >/dev/null 2>&1 && alive=$((alive + 1)); done
pss=0 uss=0
for n in "${idle_names[@]}"; do
    pid=$(cat "$ENVMGR_RUN_DIR/$n/qemu.pid")
    read -r p u < <(awk '/^Pss:/ {p = $2} /^Private_(Clean|Dirty):/ {u += $2} END {print int(p / 1024), int(u / 1024)}'         "/proc/$pid/smaps_rollup")
    pss=$((pss + p)) uss=$((uss + u))
done
after=$(mem_avail_mib)
for n in "${idle_names[@]}"; do "$envmgr" down "$n" >/dev/null 2>&1 || true; done
idle_names=()
pss=$((pss / m)) uss=$((uss / m))
[ "$uss" -gt 0 ] || uss=1
[ "$pss" -gt 0 ] || pss=1
hz=$(getconf CLK_TCK)
cpu=$(awk "BEGIN {printf \"%.1f\", 100 * ($c1 - $c0) / $hz / 30 / $m}")
label=${label:-$(echo "$accel" | tr a-z A-Z)}
line "idle envs held at once" "$alive of $m answer (up: $(awk "BEGIN {printf \"%.1f\", ($t1 - $t0) / $m}") s each)" "$label"
line "idle env: PSS / USS (private)" "$pss / $uss MiB" "$label"
line "idle env: CPU" "${cpu}% of a core" "$label"
line "MemAvailable with $m idle envs" "$before -> $after MiB" "$label"
line "idle envs before memory runs short (USS)" "$((before / uss)) (PSS: $((before / pss)))" "$label"
line "idle envs on 24 GiB (USS, PSS)" "$((24 * 1024 * 85 / 100 / uss)), $((24 * 1024 * 85 / 100 / pss)) (15% kept back)" "$label"
