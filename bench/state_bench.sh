#!/usr/bin/env bash
# make bench, saved states (docs/states.md): figures, not pass/fail.
#   bench/state_bench.sh [--image IMAGE] [--runs N] [--envs N] [--prep 'SHELL COMMAND'] [--state-parent DIR]
# On one env: `state save` p50/p99 (a state saved mid-episode: the env was restored from a base
# state and typed into), the delta's size (RAM pages, VGA memory, disk), `state restore` p50/p99
# next to `reset` p50 on the same env; then N envs started from one state, one after another: each
# one's time to ready (the CLI's restore time, and up to a first fresh frame), and each QEMU's PSS
# (the golden RAM file's pages are shared by every env; a state's own pages are each env's). --prep runs in
# the guest (as root, with the desktop's display) before the base state is saved, to measure a
# state with an application open (the apps bench uses it). The bench's states go in a new folder
# under --state-parent (ENVMGR_BENCH_STATE_PARENT, default /tmp): a flat RAM file shares the golden
# RAM file's data only on the golden's own file system, and only with reflink (XFS, Btrfs), so put
# it beside the golden states (ENVMGR_CACHE_DIR) to measure what a user's cache costs. The disk row
# gives the bytes the state owns (extents not shared) and st_blocks, and names the file system;
# bench/state_disk_bench.sh runs this on an XFS loop mount. A restore maps the state's RAM served
# over FUSE where /dev/fuse works (no flat file on disk), else its flat RAM file: ENVMGR_STATE_RAM
# (auto, served, file) chooses, and the first line says which ran.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
image=desktop runs=10 envs=16 prep= state_parent=${ENVMGR_BENCH_STATE_PARENT:-/tmp}
while [ $# -gt 0 ]; do
    case $1 in
        --image) image=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --envs) envs=$2; shift 2 ;;
        --prep) prep=$2; shift 2 ;;
        --state-parent) state_parent=$2; shift 2 ;;
        *) echo "usage: state_bench.sh [--image IMAGE] [--runs N] [--envs N] [--prep CMD] [--state-parent DIR]" >&2; exit 2 ;;
    esac
done
own_run=
[ -n "${ENVMGR_RUN_DIR:-}" ] || { ENVMGR_RUN_DIR=$(mktemp -d /tmp/envmgr-bench.XXXXXX); own_run=$ENVMGR_RUN_DIR; }
export ENVMGR_RUN_DIR
export ENVMGR_STATE_DIR=$(mktemp -d "$state_parent/envmgr-bench-states.XXXXXX") || exit 1
E=state-bench-$$
tmp=$(mktemp -d)
trap 'for d in "$ENVMGR_RUN_DIR"/$E*; do [ -d "$d" ] && "$ENVMGR" down "$(basename "$d")" >/dev/null 2>&1; done
      "$root/scripts/stop-ram-servers" "$ENVMGR_STATE_DIR"
      rm -rf "$ENVMGR_STATE_DIR" "$tmp" $own_run' EXIT
trap 'exit 130' INT TERM
accel=tcg
row() { printf '%-44s %-28s [%s]\n' "$1" "$2" "$accel"; }
# pcts FILE: "p50 X ms, p99 Y ms" of the numbers in FILE
pcts() { sort -n "$1" | awk '{v[NR] = $1} END {i = int(0.5 * (NR - 1) + 0.5) + 1; j = int(0.99 * (NR - 1) + 0.5) + 1;
    printf "p50 %.0f ms, p99 %.0f ms", v[i], v[j]}'; }
field() { sed -nE "s/.*$1 ([0-9.]+) .*/\\1/p"; } # field NAME: the number after NAME in a CLI line
pss_mib() { awk '/^Pss:/ {printf "%.0f", $2 / 1024}' "/proc/$1/smaps_rollup" 2>/dev/null; }

out=$("$ENVMGR" up --name $E --image "$image" 2>&1) || { echo "state bench: up failed: $out"; exit 1; }
accel=$(echo "$out" | sed -nE 's/.*ready \(([a-z]+)\).*/\1/p')
echo "saved states ($image, runs $runs, envs $envs${prep:+, prep: $prep})"
if [ -n "$prep" ]; then
    "$ENVMGR" exec $E --timeout 300 -- env DISPLAY=:0 sh -c "$prep" >/dev/null 2>&1 || echo "state bench: --prep failed"
fi
"$ENVMGR" exec $E -- sync >/dev/null
out=$("$ENVMGR" state save $E base 2>&1) || { echo "state bench: save failed: $out"; exit 1; }
row "save from the golden state (base)" "$(echo "$out" | field ':') ms"
row "  its RAM delta / disk / devices" "$(echo "$out" | field 'RAM delta') MiB / $(echo "$out" | field disk) MiB / $(echo "$out" | field devices) KiB"
# the first restore starts the server of the state's RAM, or builds its flat RAM file
# (docs/states.md); the later ones map it
out=$("$ENVMGR" state restore $E base 2>&1) || { echo "state bench: restore failed: $out"; exit 1; }
served=$(python3 -c "import json,sys; print(int('/ram.mnt/' in json.load(open(sys.argv[1])).get('ram_file', '')))" \
    "$ENVMGR_RUN_DIR/$E/env.json")
ready=$(echo "$out" | sed -nE 's/.*\(of which (.*) ([0-9]+) ms\).*/\1 \2 ms/p')
row "  first restore ($([ "$served" = 1 ] && echo 'RAM served over FUSE' || echo 'flat RAM file'))" \
    "$(echo "$out" | field restore) ms, of which ${ready:-nothing to ready}"
# a key pressed at once: the guest may still fault its RAM through the server (docs/states.md, "Its warm-up")
key_ms() { local t0; t0=$(date +%s%N); "$ENVMGR" act $E '{"action_type":"PRESS","key":"shift"}' >/dev/null 2>&1
    echo $(( ($(date +%s%N) - t0) / 1000000 )); }
first_key=$(key_ms)
row "  a key pressed at once after it" "$first_key ms (the next one: $(key_ms) ms)"
if [ "$served" = 1 ]; then
    # its log line comes when the warm-up ends (ram.warm), often after the keys above
    for _ in $(seq 100); do [ -e "$ENVMGR_STATE_DIR/base/ram.warm" ] && break; sleep 0.1; done
    row "  its server's warm-up (pages into the cache)" "$(sed -n 's/.*warm-up: //p' "$ENVMGR_STATE_DIR/base/ramfs.log" | tail -1)"
fi
# written back first: XFS maps a page written over a shared extent to its own block at writeback
sync -f "$ENVMGR_STATE_DIR"
ramf=$ENVMGR_STATE_DIR/base/ram.flat
ram=$(( $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['memory_mb'])" "$ENVMGR_STATE_DIR/base/state.json") << 20 ))
blocks=$(( $(stat -c %b "$ramf" 2>/dev/null || echo 0) * 512 ))
"$ENVMGR" state ls --json | RAM=$ram BLOCKS=$blocks /usr/bin/python3 -c "import json, os, sys
ram, blocks = int(os.environ['RAM']), int(os.environ['BLOCKS'])
for s in json.load(sys.stdin):
    if s['name'] == 'base' and ram:
        own, flat = s['mib'], s.get('flat_mib', 0)
        pct = lambda mib: 100.0 * mib * 2**20 / ram
        print('%.0f MiB own files (%.1f %%), flat RAM file owns %.0f MiB (%.1f %%; st_blocks %.0f MiB), in all %.1f %% of guest RAM'
              % (own, pct(own), flat, pct(flat), blocks / 2**20, pct(own + flat)))" >"$tmp/disk_row"
# with its RAM served, a state has no flat RAM file: its own files are all it costs
row "  base on disk ($(df --output=fstype "$ENVMGR_STATE_DIR" | tail -1), owned)" "$(cat "$tmp/disk_row")"
for i in $(seq "$runs"); do
    "$ENVMGR" act $E '{"action_type":"TYPING","text":"x"}' >/dev/null
    out=$("$ENVMGR" state save $E "run-$i" 2>&1) || { echo "state bench: save failed: $out"; exit 1; }
    echo "$out" | field ':' >>"$tmp/save"
    echo "$out" | field 'paused' >>"$tmp/paused"
    echo "$out" | field 'RAM delta' >>"$tmp/delta"
    echo "$out" | field 'disk' >>"$tmp/disk"
    "$ENVMGR" state rm "run-$i" >/dev/null
done
row "state save (mid-episode, on base)" "$(pcts "$tmp/save")"
row "  guest paused during the save" "$(pcts "$tmp/paused")"
row "  RAM delta / disk layer (mean)" "$(awk '{s += $1} END {printf "%.1f MiB", s / NR}' "$tmp/delta") / $(awk '{s += $1} END {printf "%.1f MiB", s / NR}' "$tmp/disk")"
for i in $(seq "$runs"); do
    out=$("$ENVMGR" state restore $E base 2>&1) || { echo "state bench: restore failed: $out"; exit 1; }
    echo "$out" | field restore >>"$tmp/restore"
    echo "$out" | awk '{for (i = 1; i < NF; i++) if ($i == "stop" || $i == "restore") s += $(i + 1)} END {print s}' >>"$tmp/restore_all"
done
for i in $(seq "$runs"); do
    "$ENVMGR" reset $E 2>&1 | field restore >>"$tmp/reset"
done
row "state restore (QEMU start + state load)" "$(pcts "$tmp/restore")"
row "  with stopping the old QEMU" "$(pcts "$tmp/restore_all")"
row "reset to the golden state, same env" "$(pcts "$tmp/reset")"

# N envs from one state, one after another (each one's own time, the others idle meanwhile)
t0=$(date +%s%N)
for k in $(seq "$envs"); do
    s=$(date +%s%N)
    o=$("$ENVMGR" up --name $E-$k --from-state base 2>&1) || { echo "state bench: up $k: $o"; continue; }
    m=$(date +%s%N)
    "$ENVMGR" screenshot $E-$k "$tmp/shot.png" >/dev/null 2>&1
    f=$(date +%s%N)
    echo "$o" | field restore >>"$tmp/uprestore"
    echo $(( (m - s) / 1000000 )) >>"$tmp/upwall"
    echo $(( (f - s) / 1000000 )) >>"$tmp/upshot"
done
t1=$(date +%s%N)
row "$envs envs up from one state" "$(wc -l <"$tmp/upwall") up in $(( (t1 - t0) / 1000000 )) ms"
row "  each: restore (QEMU start + state load)" "$(pcts "$tmp/uprestore")"
row "  each: envmgr up, wall" "$(pcts "$tmp/upwall")"
row "  each: up to a first fresh frame" "$(pcts "$tmp/upshot")"
sleep 5
for k in $(seq "$envs"); do
    pid=$(cat "$ENVMGR_RUN_DIR/$E-$k/qemu.pid" 2>/dev/null) && pss_mib "$pid" >>"$tmp/pss"; echo >>"$tmp/pss"
done
sed -i '/^$/d' "$tmp/pss"
row "  PSS per env (mean, max)" "$(awk '{s += $1; if ($1 > m) m = $1} END {printf "%.0f MiB, %.0f MiB", s / NR, m}' "$tmp/pss")"
row "  PSS of all $envs" "$(awk '{s += $1} END {printf "%.0f MiB", s}' "$tmp/pss")"
