# Shared by the integration tests: an isolated run directory, the envmgr
# binary, checks that count, waits with timeouts, and a cleanup that leaves
# no QEMU and no temp file behind whatever happens.
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ENVMGR=${ENVMGR_BIN:-$ROOT/bin/envmgr}
PNGTOOL=$ROOT/build/tools/pngtool
T=$(mktemp -d /tmp/envmgr-it.XXXXXX)
export ENVMGR_RUN_DIR=$T/run
export ENVMGR_STATE_DIR=$T/states # saved states (the setup cache too): this run's own, never the operator's
PASS=0 FAIL=0
SUITE=${SUITE:-$(basename "$0" .sh)}

cleanup() {
    for d in "$ENVMGR_RUN_DIR"/*/; do
        [ -d "$d" ] && "$ENVMGR" down "$(basename "$d")" >/dev/null 2>&1
    done
    # Belt and braces: nothing started from this run directory may survive.
    pkill -9 -f -- "$ENVMGR_RUN_DIR/" 2>/dev/null
    # nor the servers of saved states' RAM under it, nor their mounts
    "$ROOT/scripts/stop-ram-servers" "$T"
    # A run with a failed check keeps its outputs (traces, frames, logs, results) for the next person to
    # read, without what is large and rebuilt (overlays, saved states, RAM files); ENVMGR_TEST_KEEP=1
    # keeps everything of any run.
    if [ -n "${ENVMGR_TEST_KEEP:-}" ]; then
        echo "kept $T" >&2
    elif [ "$FAIL" != 0 ]; then
        rm -rf "$ENVMGR_STATE_DIR"
        find "$T" -xdev -type f \( -size +20M -o -name '*.qcow2' \) -delete 2>/dev/null
        echo "$SUITE: a check failed: its run folder is kept for a post-mortem: $T" >&2
    else
        rm -rf "$T"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok()   { PASS=$((PASS + 1)); echo "ok   $*"; }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
# check NAME COMMAND...: passes when the command exits 0
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# Counts a check script's "ok   NAME" / "FAIL NAME: why" lines read from stdin, each under LABEL; any
# other line is a failure (a traceback), unless LOOSE=1 (a script that also prints progress).
tally() {
    local label=$1 line
    while IFS= read -r line; do
        case $line in
            "ok   "*) ok "$label: ${line#ok   }" ;;
            "FAIL "*) bad "$label: ${line#FAIL }" ;;
            *) [ -n "${LOOSE:-}" ] || bad "$label: $line" ;;
        esac
    done
}
# wait_until SECONDS COMMAND...: polls every 0.5 s
wait_until() {
    local limit=$1; shift
    local end=$(( $(date +%s) + limit ))
    while [ "$(date +%s)" -lt "$end" ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
    return 1
}
# no_qemu_under PATH: no process (QEMU or other) has PATH in its command line (call it
# directly, not through bash -c, or pgrep finds that shell's own command line)
no_qemu_under() { ! pgrep -f -- "$1" >/dev/null; }
finish() {
    echo "$SUITE: $PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ]
}
# qmp_return ENV COMMAND: the "return" of one QMP command to env ENV's QEMU, as JSON (a test's view
# of QEMU itself, beside envmgr)
qmp_return() { python3 - "$ENVMGR_RUN_DIR/$1/qmp.sock" "$2" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
for cmd in ("qmp_capabilities", sys.argv[2]):
    f.write(json.dumps({"execute": cmd}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            break
print(json.dumps(r["return"]))
PY
}
# gexec ENV CMD...: run in the guest as root with the desktop's display
gexec() { local e=$1; shift; "$ENVMGR" exec "$e" -- env DISPLAY=:0 "$@"; }
act() { "$ENVMGR" act "$1" "$2"; }
shot() { "$ENVMGR" screenshot "$1" "$2"; }
# pick_tasks DEST DIR ID...: a task folder DEST holding DIR's tasks ID... and a copy of each of DIR's
# subfolders (files, scripts: a task's files may not resolve outside its own folder)
pick_tasks() {
    local dest=$1 src=$2 d id; shift 2
    mkdir -p "$dest" || return 1
    for d in "$src"/*/; do cp -r "$d" "$dest/" || return 1; done
    for id in "$@"; do cp "$src/$id.json" "$dest/" || return 1; done
}
# score_of DIR ID: the score of task ID's final result line in a suite run's DIR/results.jsonl
score_of() { python3 -c "
import json,sys
s='missing'
for line in open(sys.argv[1]+'/results.jsonl'):
    r=json.loads(line)
    if r.get('task_id')==sys.argv[2] and r.get('final', True): s=r['score']
print(s)" "$1" "$2"; }
# import_scratch: this test's own image root and cache (an imported image's golden state is the
# test's, not the operator's), with the host's KVM verdict copied in if probed
import_scratch() {
    local real=${ENVMGR_CACHE_DIR:-/var/cache/envmgr}
    [ "$(id -u)" = 0 ] || real=${ENVMGR_CACHE_DIR:-$HOME/.cache/envmgr}
    export ENVMGR_IMAGE_DIR=$T/images ENVMGR_CACHE_DIR=$T/cache
    mkdir -p "$ENVMGR_IMAGE_DIR" "$ENVMGR_CACHE_DIR"
    cp "$real/accel.json" "$ENVMGR_CACHE_DIR/" 2>/dev/null
}
ms_since() { python3 -c "import sys,time; print(f'{(time.time()-float(sys.argv[1]))*1000:.0f}')" "$1"; }
# import_not_kept LABEL WHY_RE NAME DISK ARGS...: `image import NAME DISK ARGS` of a guest that never
# gets ready exits 2 with one line (besides progress) matching WHY_RE, and keeps nothing: no image, no
# golden state, no QEMU
import_not_kept() {
    local label=$1 re=$2 out rc lines; shift 2
    out=$("$ENVMGR" image import "$@" 2>&1); rc=$?
    lines=$(printf '%s\n' "$out" | grep -vc 'checked in [0-9.]* s; copying\|building the golden state of')
    check "$label: exit 2, one line" bash -c \
        "[ $rc = 2 ] && [ $lines = 1 ] && printf '%s' \"\$1\" | grep -q -- \"\$2\"" _ "$out" "$re"
    [ $rc = 2 ] || printf '%s\n' "$out"
    check "... and nothing kept: no image, no golden state" bash -c \
        "[ -z \"\$(ls -A '$ENVMGR_IMAGE_DIR')\" ] && [ -z \"\$(ls '$ENVMGR_CACHE_DIR/golden' 2>/dev/null | grep -v '\.lock$')\" ]"
    check "... no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
}
# import_ok LABEL NAME GUEST DISK ARGS...: `image import NAME DISK --guest GUEST ARGS` exits 0 (the time
# it took printed), and `image ls` lists NAME with that guest interface as imported
import_ok() {
    local label=$1 name=$2 guest=$3 disk=$4 out rc t0; shift 4
    t0=$(date +%s.%N)
    out=$("$ENVMGR" image import "$name" "$disk" --guest "$guest" "$@" 2>&1); rc=$?
    check "$label: exit 0" test $rc = 0
    [ $rc = 0 ] || printf '%s\n' "$out"
    echo "   import + golden state: $(ms_since $t0) ms; $(printf '%s\n' "$out" | grep -o 'golden state ready in.*')"
    check "image ls: $name, guest $guest, imported" bash -c \
        "'$ENVMGR' image ls | grep -qE '^$name +[^ ]+ +$guest +.*/$name \\(imported\\)\$'"
}
# exec_basics E HOW: `envmgr exec` on env E gives back a command's stdout, exit code and stderr (HOW
# names the way it goes, in the first check's label)
exec_basics() {
    local e=$1 how=$2 out rc
    out=$("$ENVMGR" exec "$e" -- sh -c 'echo out-$((6*7)); echo err-x >&2; exit 3' 2>"$T/exec.err"); rc=$?
    check "exec ($how): the command's stdout" test "$out" = out-42
    check "exec: its exit code (3)" test $rc = 3
    check "exec: its stderr" grep -q '^err-x' "$T/exec.err"
}
# reset_clock E HOW: env E resets (its wall time printed), and its first exec after the reset (time
# printed) finds the guest's clock set to the host's, not the golden state's (HOW: what sets it)
reset_clock() {
    local e=$1 how=$2 t0 g
    t0=$(date +%s.%N)
    check "reset" "$ENVMGR" reset "$e"
    echo "   reset: $(ms_since $t0) ms wall"
    sleep 2
    t0=$(date +%s.%N)
    g=$("$ENVMGR" exec "$e" -- date +%s)
    echo "   first exec after reset ($how + exec): $(ms_since $t0) ms"
    check "after a reset the guest's clock is the host's ($how), not the golden state's" \
        bash -c "d=\$(( $(date +%s) - ${g:-0} )); [ \${d#-} -le 3 ]"
}
