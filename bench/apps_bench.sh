#!/usr/bin/env bash
# make bench, apps section: the apps image's figures (TCG). Runs when ENVMGR_APPS=1 or when the apps
# image of the current recipe is cached (it never builds one otherwise). Figures, not pass/fail:
#   build time and size (its build.log), then envbench on it (new env, reset, screenshot at 1920x1080,
#   idle CPU and PSS, cold boot to golden), then per app: start to window mapped, and the focused
#   window's accessibility tree dump (envmgr-guest a11y-tree): time, nodes, cost per node; the showing
#   nodes at the application's first read, its whole tree, the showing nodes again, and the whole
#   desktop's showing tree that an observation reads.
# ENVMGR_APPS_IMAGE=NAME measures another image with the apps layer (default apps; e.g. gnome, the
# GNOME probe); ENVMGR_APPS_BENCH_APPS="calc vlc" only these apps ("" none: the desktop rows only);
# ENVMGR_APPS_BENCH_COLD=" " no cold boot in envbench; ENVMGR_APPS_BENCH_SKIP="states" skips the
# saved state and setup cache benches.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
img=${ENVMGR_APPS_IMAGE:-apps}
apps=" ${ENVMGR_APPS_BENCH_APPS-chromium calc writer impress gimp vlc thunderbird terminal} "
key=$("$root/vm-images/build-image.sh" --key "$img" 2>/dev/null | cut -c1-16)
cache=${ENVMGR_IMAGE_CACHE:-/var/cache/envmgr/images}/$img-$key
if [ "${ENVMGR_APPS:-0}" != 1 ] && [ ! -f "$cache/manifest.json" ]; then
    echo "apps bench: skipped (no cached $img image for this recipe; ENVMGR_APPS=1 builds it: make image-$img)"
    exit 0
fi
t=$(date +%s.%N)
make -s -C "$root/vm-images" "image-$img" >/dev/null || { echo "apps bench: the $img image does not build"; exit 1; }
row() { printf '%-44s %-28s [%s]\n' "$1" "$2" tcg; }
out=$root/vm-images/out/$img
echo "$img image ($(basename "$(readlink -f "$out")"))"
row "image build (build.log total)" "$(awk '$1 == "total" {print $2, $3}' "$out/build.log")"
# build.log has two "packages" rows: the step's time ("packages 215.0 s") and the count ("packages 754")
row "image disk.qcow2 (zstd) / packages" "$(du -m "$out/disk.qcow2" | cut -f1) MB / $(awk '$1 == "packages" && NF == 2 {print $2}' "$out/build.log")"
"$root/build/bench/envbench" --image "$img" --resets 10 --shots 20 ${ENVMGR_APPS_BENCH_COLD:---cold}

E=apps-bench-$$
gx() { "$ENVMGR" exec "$E" --timeout "${GX_TIMEOUT:-120}" --max-output 16777216 -- "$@"; }
tree=$(mktemp)
trap '"$ENVMGR" down "$E" >/dev/null 2>&1; rm -f "$tree"' EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
"$ENVMGR" up --name "$E" --image "$img" >/dev/null || { echo "apps bench: envmgr up --image $img failed"; exit 1; }
now() { date +%s.%N; }
# app NAME PYTHON-CONDITION-ON-w CMD...: start it as the user, time until its window maps, then the tree
app() {
    local name=$1 cond=$2 t0 t1 ok=
    shift 2
    [[ $apps == *" $name "* ]] || return 0
    gx runuser -u user -- env DISPLAY=:0 HOME=/home/user XDG_RUNTIME_DIR=/run/user/1000 \
        DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus sh -c 'cd ~ && setsid -f "$@" </dev/null >/dev/null 2>&1' sh "$@"
    t0=$(now)
    for _ in $(seq 240); do
        if gx envmgr-guest windows 2>/dev/null | /usr/bin/python3 -c \
            "import json, sys; d = json.load(sys.stdin); sys.exit(0 if any($cond for w in d['windows']) else 1)"; then
            ok=1; break
        fi
        sleep 0.5
    done
    t1=$(now)
    if [ -z "$ok" ]; then row "$name: start to window" "no window in 120 s"; return; fi
    row "$name: start to window" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }')"
    sleep "${SETTLE:-10}"
    # First what an episode's first observation reads: the showing nodes of the focused window, the
    # application's first read (which also pays for its bridge's first answers).  Then its whole tree,
    # however long it takes (an observation stops at its 20 s cap), twice.  Then the showing nodes
    # again, of the window and of the whole desktop.  The dump's own time (in the guest), then as the
    # host sees it (guest agent, start).
    tree_row "$name" "showing tree, first read" --scope focused --showing
    tree_row "$name" "a11y tree (focused window)" --scope focused
    tree_row "$name" "a11y tree (focused window)" --scope focused
    tree_row "$name" "showing tree (focused window)" --scope focused --showing
    tree_row "$name" "observation (desktop, showing)" --scope all --showing
    # Calc: the showing tree with each shown cell read through AT-SPI, none derived (what it cost
    # before). Last: the 1100 cell objects it makes soffice hand out slow down the dumps after it.
    if [ "$name" = calc ]; then
        tree_row "$name" "showing tree, every cell read" --scope focused --showing --read-every-cell
    fi
    # Each app starts from the golden state, as in an episode: killing the last one instead left
    # LibreOffice's document recovery dialog for the next start.
    "$ENVMGR" reset "$E" >/dev/null
}
# tree_row APP LABEL ARGS...: one dump of envmgr-guest a11y-tree ARGS, as a row
tree_row() {
    local name=$1 label=$2 t0 t1
    shift 2
    t0=$(now)
    GX_TIMEOUT=300 gx envmgr-guest a11y-tree --timeout 240 "$@" >"$tree"
    t1=$(now)
    /usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[2]))
n, s = d.get("nodes", 0), d.get("elapsed_s", 0)
c = d.get("cells") or {}
cells = ", cells %d read (%d light) + %d derived" % (c["read"], c.get("light", 0), c["derived"]) if c.get("read") or c.get("derived") else ""
print("%-44s %-28s [tcg]" % (sys.argv[1],
      "%.2f s (%.2f s from the host), %d nodes, %.1f ms/node, %d calls%s%s" % (
          s, float(sys.argv[3]), n, 1000.0 * s / max(n, 1), d.get("calls", 0), cells,
          ", truncated: " + ",".join(d["truncated"]) if d.get("truncated") else "")))' \
        "$name: $label" "$tree" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}
# The desktop alone, before any app: the whole tree and what an observation reads
tree_row desktop "a11y tree (whole desktop)" --scope all
tree_row desktop "observation (desktop, showing)" --scope all --showing
app chromium '"chromium" in [c.lower() for c in w["class"]]' google-chrome --remote-debugging-port=1337 about:blank
app calc '"calc" in w["title"].lower() or "untitled" in w["title"].lower()' libreoffice --calc
app writer '"writer" in w["title"].lower() or "untitled" in w["title"].lower()' libreoffice --writer
app impress '"impress" in w["title"].lower() or "untitled" in w["title"].lower()' libreoffice --impress
SETTLE=15 app gimp '"gnu image" in w["title"].lower()' gimp
app vlc '"vlc" in " ".join(w["class"]).lower()' vlc
app thunderbird '"thunderbird" in " ".join(w["class"]).lower()' thunderbird
app terminal '"terminal" in " ".join(w["class"]).lower()' gnome-terminal
row "apps bench total" "$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.0f s", b - a }')"
[[ " ${ENVMGR_APPS_BENCH_SKIP:-} " == *" states "* ]] && exit 0
# saved states and the setup cache on the apps image: a state with Calc open, and episode-ready
# with and without the setup cache for two of its tasks (Calc, Chromium)
calc='runuser -u user -- env DISPLAY=:0 HOME=/home/user XDG_RUNTIME_DIR=/run/user/1000 \
    DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus sh -c "cd ~ && setsid -f libreoffice --calc </dev/null >/dev/null 2>&1"; sleep 60'
"$root/bench/state_bench.sh" --image apps --runs 5 --envs 4 --prep "$calc"
# the same state on XFS with reflink (opt-in: it mounts a loop device): the flat RAM file's disk cost
[ "${ENVMGR_BENCH_REFLINK:-}" != 1 ] || "$root/bench/state_disk_bench.sh" --image apps --runs 3 --envs 2 --prep "$calc" ||
    echo "state_disk_bench: failed (see above)"
"$root/bench/setup_cache_bench.sh" --repeats 3 "$root/tasks/apps/calc-add-row.json" "$root/tasks/apps/chrome-new-tab.json"
# a suite of 10 apps tasks x 5 with the cache off and on (opt-in: about 40 min)
[ "${ENVMGR_BENCH_APPS_SUITE:-}" != 1 ] || "$root/bench/setup_cache_suite_bench.sh" ||
    echo "setup_cache_suite_bench: failed (see above)"
