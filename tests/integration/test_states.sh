#!/usr/bin/env bash
# Saved states on the desktop image (docs/states.md): save, restore and branch round trips (the
# screen, files, the guest clock, the agent), two envs from one state, a tampered state refused,
# removal refused while needed, eviction under a cap, bad input. Prints `N passed, N failed`.
SUITE=states
source "$(dirname "$0")/lib.sh"

E1=it-st-1 E2=it-st-2 E3=it-st-3
has() { "$ENVMGR" exec "$1" -- test -e "$2"; }
hasnt() { ! has "$@"; }
same_screen() { test "$("$PNGTOOL" diff "$1" "$2")" = 0.000000; }
clock_right() { # the guest's clock within 3 s of the host's
    local g h; g=$("$ENVMGR" exec "$1" -- date +%s) && h=$(date +%s) && [ $((g - h)) -le 3 ] && [ $((h - g)) -le 3 ]
}
state_field() { "$ENVMGR" state ls --json | python3 -c "
import json, sys
for s in json.load(sys.stdin):
    if s['name'] == sys.argv[1]: print(s.get(sys.argv[2]))" "$1" "$2"; }

out=$("$ENVMGR" up --name $E1 --accel tcg 2>&1) && ok "up $E1" || { bad "up $E1: $out"; finish; exit 1; }

# --- save, change, restore ----------------------------------------------------------------------
# These first rounds restore from the flat RAM file written out; from "many envs" on, the state's
# RAM is served over FUSE, the default where /dev/fuse works (docs/states.md).
export ENVMGR_STATE_RAM=file
"$ENVMGR" exec $E1 -- sh -c 'echo saved > /root/before && sync'
act $E1 '{"action_type":"CLICK","x":640,"y":400,"button":"right"}' # a menu: a screen unlike the clean one
sleep 2
out=$("$ENVMGR" state save $E1 s1 2>&1); rc=$?
echo "$out"
check "state save s1 (exit 0)" test $rc = 0
shot $E1 "$T/saved.png"
check "state ls lists s1, saved from the golden state" test "$(state_field s1 parent)" = None
check "the env runs on after a save (agent answers)" "$ENVMGR" exec $E1 -- true
"$ENVMGR" exec $E1 -- sh -c 'echo later > /root/after'
act $E1 '{"action_type":"PRESS","key":"esc"}'
out=$("$ENVMGR" state restore $E1 s1 2>&1); rc=$?
echo "$out"
check "state restore s1 (exit 0)" test $rc = 0
shot $E1 "$T/restored.png"
check "the screen after restore is the saved one" same_screen "$T/saved.png" "$T/restored.png"
check "a file written before the save is there" has $E1 /root/before
check "a file written after the save is gone" hasnt $E1 /root/after
check "the guest clock is right after a restore" clock_right $E1
check "the guest agent answers after a restore" bash -c "'$ENVMGR' exec $E1 -- cat /root/before | grep -qx saved"
check "ls shows the env on s1" bash -c "'$ENVMGR' ls --json | grep -q '\"state\": \"s1\"'"
F1=$ENVMGR_STATE_DIR/s1/ram.flat
check "the first restore built s1's flat RAM file, and said so" bash -c "echo '$out' | grep -q 'flat RAM file' && test -f '$F1' -a -f '$ENVMGR_STATE_DIR/s1/flat.json'"
check "... sparse: the guest's untouched pages are holes" test "$(du -k "$F1" | cut -f1)" -lt "$(( $(stat -c %s "$F1") / 1024 ))"
check "... counted apart from the state's own files in state ls" python3 -c "import sys; sys.exit(not float('$(state_field s1 flat_mib)') > 0)"
out=$("$ENVMGR" state restore $E1 s1 2>&1)
check "a second restore maps it as it is (no build)" bash -c "! echo '$out' | grep -q 'flat RAM file'"
check "... and shows the saved screen" bash -c "'$ENVMGR' screenshot $E1 '$T/again.png' >/dev/null && '$PNGTOOL' diff '$T/saved.png' '$T/again.png' | grep -qx 0.000000"

# --- branch: a child state, then back to its parent and forth ---------------------------------
"$ENVMGR" exec $E1 -- sh -c 'echo branch > /root/branch && sync'
check "state save s2 on an env restored from s1" "$ENVMGR" state save $E1 s2
check "s2's parent is s1" test "$(state_field s2 parent)" = s1
check "restore s1 (the earlier state)" "$ENVMGR" state restore $E1 s1
check "the branch's file is absent in s1" hasnt $E1 /root/branch
check "restore s2" "$ENVMGR" state restore $E1 s2
check "the branch's file is present in s2, and s1's too" bash -c "'$ENVMGR' exec $E1 -- test -e /root/branch &&
    '$ENVMGR' exec $E1 -- test -e /root/before"
# a flat RAM file changed behind envmgr's back is never run: it is built again from the state
off=$(( $(stat -c %s "$F1") / 2 ))
orig=$(od -An -tx1 -j $off -N 8 "$F1")
chmod u+w "$F1" && printf 'XXXXXXXX' | dd of="$F1" bs=1 seek=$off conv=notrunc 2>/dev/null
out=$("$ENVMGR" state restore $E1 s1 2>&1); rc=$?
echo "$out"
check "restore of s1 with its flat RAM file tampered with: built again (exit 0)" bash -c "[ $rc = 0 ] && echo '$out' | grep -q 'flat RAM file'"
check "... the tampered bytes are gone" test "$(od -An -tx1 -j $off -N 8 "$F1")" = "$orig"
check "... the guest runs the state: its files, not the branch's, the agent answers" bash -c "'$ENVMGR' exec $E1 -- cat /root/before | grep -qx saved && ! '$ENVMGR' exec $E1 -- test -e /root/branch"
check "reset goes back to the golden state" bash -c "'$ENVMGR' reset $E1 >/dev/null && ! '$ENVMGR' exec $E1 -- test -e /root/before"

unset ENVMGR_STATE_RAM

# --- many envs from one state -------------------------------------------------------------------
"$ENVMGR" up --name $E2 --from-state s2 >"$T/up2" 2>&1 & p2=$!
"$ENVMGR" up --name $E3 --from-state s2 >"$T/up3" 2>&1 & p3=$!
wait $p2; r2=$?; wait $p3; r3=$?
cat "$T/up2" "$T/up3"
check "two envs up from s2 at once" test "$r2$r3" = 00
shot $E2 "$T/e2.png"
shot $E3 "$T/e3.png"
check "both show the same screen" same_screen "$T/e2.png" "$T/e3.png"
check "both have the state's files" bash -c "'$ENVMGR' exec $E2 -- test -e /root/branch && '$ENVMGR' exec $E3 -- test -e /root/branch"
"$ENVMGR" exec $E2 -- sh -c 'echo mine > /root/e2only'
check "an env's writes stay its own" hasnt $E3 /root/e2only
check "both clocks are right" bash -c "$(declare -f clock_right); ENVMGR='$ENVMGR'; clock_right $E2 && clock_right $E3"
check "state ls counts s2's two envs" test "$(state_field s2 users | python3 -c 'import ast,sys; print(len(ast.literal_eval(sys.stdin.read())))')" = 2

# --- the state's RAM served over FUSE --------------------------------------------------------------
# no server of the state's RAM at MNT, nor a mount (a function: pgrep in bash -c would find that shell)
server_gone() { ! pgrep -f -- "__ramfs $1" >/dev/null && ! grep -q " $1" /proc/mounts; }
if ! { [ -c /dev/fuse ] && [ "$(id -u)" = 0 ]; }; then
    echo "note: no /dev/fuse or not root: restores here wrote the flat RAM file; the served RAM is not tested"
else
    ram_file() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ram_file'])" "$ENVMGR_RUN_DIR/$1/env.json"; }
    ID2=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['id'])" "$ENVMGR_STATE_DIR/s2/state.json")
    SERVED2=$ENVMGR_STATE_DIR/s2/ram.mnt/$ID2
    check "envs from s2 map its RAM served over FUSE, named by its id" \
        bash -c "[ '$(ram_file $E2)' = '$SERVED2' ] && [ '$(ram_file $E3)' = '$SERVED2' ] && [ \$(stat -f -c %T '$SERVED2') = fuseblk -o \$(stat -f -c %t '$SERVED2') = 65735546 ]"
    check "... byte for byte the flat RAM file written from the same chain (s1, s2)" cmp "$SERVED2" "$ENVMGR_STATE_DIR/s2/ram.flat"
    warmed() { grep -q 'warm-up: [0-9]* MiB in' "$1/ramfs.log" && test -e "$1/ram.warm"; }
    check "... whose server read the state's pages into the cache (its log, its marker)" \
        wait_until 30 warmed "$ENVMGR_STATE_DIR/s2"
    one_server() { test "$(pgrep -fc -- "__ramfs $1")" = 1; } # the warm-up's process has ended by then
    check "... one server for both envs" wait_until 20 one_server "$ENVMGR_STATE_DIR/s2/"
    check "a save from an env on a served state (s2 -> s2b)" "$ENVMGR" state save $E3 s2b
    check "... whose parent is s2" test "$(state_field s2b parent)" = s2
    E4=it-st-4
    MNT1=$ENVMGR_STATE_DIR/s1/ram.mnt
    "$ENVMGR" up --name $E4 --from-state s2b >/dev/null 2>&1
    check "an env from s2b has s2's files" bash -c "'$ENVMGR' exec $E4 -- test -e /root/branch"
    "$ENVMGR" down $E4 >/dev/null
    ENVMGR_STATE_RAM_IDLE_S=1 "$ENVMGR" up --name $E4 --from-state s1 >/dev/null 2>&1
    pkill -9 -f -- "__ramfs $MNT1 " # its server killed under it: the mount is dead
    "$ENVMGR" down $E4 >/dev/null
    check "a killed server leaves a dead mount" bash -c "stat '$MNT1' 2>&1 | grep -q 'not connected'"
    out=$(ENVMGR_STATE_RAM_IDLE_S=1 "$ENVMGR" up --name $E4 --from-state s1 2>&1); rc=$?
    check "the next env from s1 starts a server again (exit 0)" test $rc = 0
    check "... and its guest runs s1: its file, the agent answers" bash -c "'$ENVMGR' exec $E4 -- cat /root/before | grep -qx saved"
    "$ENVMGR" down $E4 >/dev/null
    check "with no env on it, the server leaves after its idle time and unmounts" wait_until 20 server_gone "$MNT1 "
    "$ENVMGR" up --name $E4 --from-state s1 >/dev/null 2>&1
    pkill -9 -f -- "__ramfs $MNT1 "
    "$ENVMGR" down $E4 >/dev/null
    out=$("$ENVMGR" gc --keep-golden 2>&1)
    check "gc detaches the dead mount of a killed server, saying so" \
        bash -c "echo '$out' | grep -q 'RAM server that was killed' && ! grep -q ' $MNT1 ' /proc/mounts"
    check "s2b's removal ends its server and its mount" bash -c "'$ENVMGR' state rm s2b >/dev/null && ! grep -q '$ENVMGR_STATE_DIR/s2b/' /proc/mounts"

    # Cold restores typed into at once, 10 times: each env starts a new server (the last one left
    # after its idle second), so the guest faults its RAM through FUSE while the keys arrive. Keys
    # and buttons go a batch at a time, each taken by the guest first: a slow guest takes them late,
    # never loses them.
    E5=it-st-5
    "$ENVMGR" up --name $E5 >/dev/null 2>&1
    act $E5 '{"action_type":"HOTKEY","keys":["ctrl","alt","t"]}' >/dev/null
    xterm_up() { "$ENVMGR" exec $E5 -- env DISPLAY=:0 xdotool search --class xterm >/dev/null 2>&1; }
    wait_until 60 xterm_up && sleep 2
    "$ENVMGR" state save $E5 typing >/dev/null 2>&1
    "$ENVMGR" down $E5 >/dev/null
    MNT5=$ENVMGR_STATE_DIR/typing/ram.mnt
    lost=0 cold=0 firsts=""
    for i in $(seq 10); do
        wait_until 20 server_gone "$MNT5 " && cold=$((cold + 1))
        ENVMGR_STATE_RAM_IDLE_S=1 "$ENVMGR" up --name $E5 --from-state typing >/dev/null 2>&1
        line="echo cold-$i-abcdefghijklmnopqrstuvwxyz-0123456789 >/tmp/cold$i"
        t0=$(date +%s%N)
        act $E5 "{\"action_type\":\"TYPING\",\"text\":\"$line\\n\"}" >/dev/null 2>&1
        firsts="$firsts $(( ($(date +%s%N) - t0) / 1000000 ))"
        got() { [ "$("$ENVMGR" exec $E5 -- cat /tmp/cold$i 2>/dev/null)" = "cold-$i-abcdefghijklmnopqrstuvwxyz-0123456789" ]; }
        wait_until 20 got || { lost=$((lost + 1)); echo "cold restore $i: typed '$line', the file holds '$("$ENVMGR" exec $E5 -- cat /tmp/cold$i 2>&1)'"; }
        "$ENVMGR" down $E5 >/dev/null
    done
    echo "cold restores typed into at once: envmgr act took (ms):$firsts"
    check "10 cold restores from a served state, each typed into at once: every line arrived whole ($lost lost, $cold of 10 cold)" \
        test "$lost/$cold" = 0/10
    "$ENVMGR" state rm typing >/dev/null 2>&1
fi

# --- refusals -----------------------------------------------------------------------------------
out=$("$ENVMGR" state rm s1 2>&1); rc=$?
check "rm of a state another was saved from: exit 2, naming it" bash -c "[ $rc = 2 ] && echo '$out' | grep -q s2"
out=$("$ENVMGR" state rm s2 2>&1); rc=$?
check "rm of a state envs run on: exit 2" bash -c "[ $rc = 2 ] && echo '$out' | grep -q 'runs on it'"
out=$("$ENVMGR" state save $E1 s1 2>&1); rc=$?
check "save under a taken name: exit 2" bash -c "[ $rc = 2 ] && echo '$out' | grep -q exists"
out=$("$ENVMGR" state save $E1 ../x 2>&1); rc=$?
check "save under a bad name: exit 2, one line" bash -c "[ $rc = 2 ] && [ \$(echo '$out' | wc -l) = 1 ]"
out=$("$ENVMGR" state save $E1 setup-0123 2>&1); rc=$?
check "save under the setup cache's names: exit 2" test $rc = 2
check "... saying they are the setup cache's" grep -q 'setup cache' <<<"$out"
out=$("$ENVMGR" state restore $E1 nosuch 2>&1); rc=$?
check "restore of a missing state: exit 2" bash -c "[ $rc = 2 ] && echo '$out' | grep -q 'does not exist'"
out=$(ENVMGR_STATE_RAM=bogus "$ENVMGR" state restore $E1 s1 2>&1); rc=$?
check "restore with a bad ENVMGR_STATE_RAM: exit 2 naming it, one line; the env still runs" \
    bash -c "[ $rc = 2 ] && echo '$out' | grep -q ENVMGR_STATE_RAM && [ \$(echo '$out' | wc -l) = 1 ] && '$ENVMGR' exec $E1 -- true"
out=$("$ENVMGR" up --name x --from-state s1 --image desktop 2>&1); rc=$?
check "up --from-state with --image: exit 2" test $rc = 2
f=$ENVMGR_STATE_DIR/s1/ram.delta
chmod u+w "$f" && printf 'X' | dd of="$f" bs=1 seek=8192 conv=notrunc 2>/dev/null
out=$("$ENVMGR" state restore $E1 s1 2>&1); rc=$?
check "a tampered state is refused, naming the file" bash -c "[ $rc != 0 ] && echo '$out' | grep -q 'ram.delta does not match its sha256'"
check "the env whose restore was refused still runs" "$ENVMGR" exec $E1 -- true
out=$("$ENVMGR" up --name $E1-t --from-state s2 2>&1); rc=$?
check "a state whose parent was tampered with is refused too" bash -c "[ $rc != 0 ] && echo '$out' | grep -q 'state .s1.'"
check "the refused up left no run directory" test ! -e "$ENVMGR_RUN_DIR/$E1-t"

# --- the HTTP API and the Python client ----------------------------------------------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" --out "$T/out" --task-root "$ROOT/tasks" --accel tcg \
    >"$T/serve.out" 2>"$T/serve.err" &
SERVE=$!
wait_until 20 grep -q 'listening on' "$T/serve.out"
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
export PYTHONPATH=$ROOT/clients/python
out=$(python3 "$ROOT/clients/python/examples/branch_rollouts.py" "$URL" "$T/token" "$ROOT/tasks/demo/terminal-mkdir-tree.json" 4 2>&1)
echo "$out" | tail -3
check "the RL example: 4 rollouts from step 1 score 1, 0, 1, 0" test "$(echo "$out" | tail -1)" = '{"scores": [1.0, 0.0, 1.0, 0.0]}'
cat >"$T/api_check.py" <<'PY'
import io, json, sys, tarfile
from envmgr_client import Client, EnvmgrEnv, EnvmgrError
url, token, task_path, tmp = sys.argv[1], open(sys.argv[2]).read().strip(), sys.argv[3], sys.argv[4]
def check(name, cond):
    print(("ok   " if cond else "FAIL ") + name)
def status(f):
    try:
        f()
    except EnvmgrError as e:
        return e.status, e.field
    return None
task = json.load(open(task_path))
with EnvmgrEnv(url, token) as env:
    env.reset(task_config="demo/terminal-mkdir-tree.json")  # by path: the trace carries the task (replay)
    info = env.save_state("api-a")
    check("save_state answers with its sizes (%.1f MiB RAM delta, %.0f ms)" % (info["ram_delta_mib"], info["save_ms"]),
          info["name"] == "api-a" and info["ram_delta_mib"] > 0)
    obs = env.load_state("api-a")
    first = obs["screenshot"]
    check("load_state answers with an observation at step 0", obs["screenshot"][:4] == b"\x89PNG" and obs["step"] == 0)
    with tarfile.open(fileobj=io.BytesIO(open(env.trace(tmp + "/t.tar"), "rb").read())) as tf:
        name = [m for m in tf.getnames() if m.endswith("trace.jsonl")][0]
        hdr = json.loads(tf.extractfile(name).readline())
    check("the restored episode's trace header names the state", hdr.get("from_state", {}).get("name") == "api-a")
    env.step({"action_type": "TYPING", "text": "mkdir -p ~/projects/envmgr/src\n"})
    check("an episode restored from a state is scored as any other", env.evaluate() == 1.0)
    with tarfile.open(env.trace(tmp + "/t2.tar")) as tf:
        tf.extractall(tmp + "/rtrace")
    rows = [s for s in Client(url, token).states() if s["name"] == "api-a"]
    check("GET /v1/states lists it with one env on it", len(rows) == 1 and rows[0]["users"] == 1)
    check("save_state under a bad name: 400 naming name", status(lambda: env.save_state("../x")) == (400, "name"))
    check("save_state under a taken name: 400", status(lambda: env.save_state("api-a")) == (400, "name"))
    check("save_state under the setup cache's names: 400", status(lambda: env.save_state("setup-0123")) == (400, "name"))
    check("load_state of a missing state: 400 naming name", status(lambda: env.load_state("nosuch")) == (400, "name"))
    with EnvmgrEnv(url, token, from_state="api-a") as env2:
        check("an env created from_state shows the state's screen", env2.screenshot() == first)
    check("from_state with image: 400", status(lambda: EnvmgrEnv(url, token, image="desktop", from_state="api-a"))
          == (400, "from_state"))
PY
tally api < <(timeout 600 python3 "$T/api_check.py" "$URL" "$T/token" "$ROOT/tasks/demo/terminal-mkdir-tree.json" "$T" 2>&1)
kill -TERM $SERVE; wait $SERVE
tr=$(dirname "$(find "$T/rtrace" -name trace.jsonl | head -1)")
out=$("$ENVMGR" replay "$tr" --out "$T/replayed" 2>&1); echo "$out" | head -3
check "a replay of an episode that began from a state restores it: REPRODUCED" bash -c "echo '$out' | grep -q REPRODUCED"
check "the server stopped and took its envs down" no_qemu_under "$ENVMGR_RUN_DIR/api"

# --- the setup cache -----------------------------------------------------------------------------
pick_tasks "$T/tasks" "$ROOT/tasks/demo" terminal-mkdir-tree
TASK=$T/tasks/terminal-mkdir-tree.json
AGENT="$ROOT/tasks/agents/scripted --tasks $T/tasks"
# run OUT [ENV=VALUE...]: one episode of $TASK with the scripted agent into $T/OUT
run() { local out=$1; shift; env "$@" "$ENVMGR" run "$TASK" --agent "$AGENT" --out "$T/$out" >"$T/$out.log" 2>&1; }
hdr() { head -1 "$T/$1/trace/trace.jsonl" | python3 -c "import json,sys; print(json.load(sys.stdin).get('setup_cache',{}).get('$2'))"; }
score() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['score'])" "$T/$1/result.json"; }
export ENVMGR_STATE_DIR=$T/sc-states # a cache of its own: the API's episodes above cached this setup too
run sc1
check "setup cache, first episode: the setup ran (score $(score sc1))" test "$(hdr sc1 used)/$(score sc1)" = ran/1.0
KEY=$(hdr sc1 key)
check "... and its state was saved after the setup" test -e "$ENVMGR_STATE_DIR/$(hdr sc1 state)/state.json"
run sc2
check "second episode: the setup came from the cache, same key, same score" \
    test "$(hdr sc2 used)/$(hdr sc2 key)/$(score sc2)" = "restored/$KEY/1.0"
out=$("$ENVMGR" replay "$T/sc2/trace" --out "$T/sc2-replay" 2>&1)
check "a replay of the cached episode: REPRODUCED" bash -c "echo '$out' | grep -q REPRODUCED"
python3 - "$TASK" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["config"].insert(0, {"type": "execute", "parameters": {"command": "true", "timeout": 30}})
json.dump(t, open(sys.argv[1], "w"), indent=1)
PY
run sc3
check "a changed setup step: another key, the setup runs again" test "$(hdr sc3 used)" = ran -a "$(hdr sc3 key)" != "$KEY"
run sc4 ENVMGR_SETUP_CACHE=off
check "the operator's ENVMGR_SETUP_CACHE=off: the setup runs, said in the trace" \
    bash -c "[ '$(hdr sc4 used)' = None ] && grep -q operator '$T/sc4/trace/trace.jsonl'"
python3 - "$TASK" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["setup_cache"] = False
json.dump(t, open(sys.argv[1], "w"), indent=1)
PY
run sc5
check "a task's \"setup_cache\": false: the setup runs, said in the trace" \
    bash -c "[ '$(hdr sc5 used)' = None ] && grep -q 'opts out' '$T/sc5/trace/trace.jsonl'"
f=$ENVMGR_STATE_DIR/$(hdr sc3 state)/ram.delta
chmod u+w "$f" && printf 'X' | dd of="$f" bs=1 seek=5000 conv=notrunc 2>/dev/null
python3 - "$TASK" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
del t["setup_cache"]
json.dump(t, open(sys.argv[1], "w"), indent=1)
PY
run sc6
check "a tampered cached state is refused: the setup runs, the score is the same" \
    bash -c "[ '$(hdr sc6 used)/$(score sc6)' = ran/1.0 ] && [ '$(hdr sc6 refused)' != None ]"
export ENVMGR_STATE_DIR=$T/states

# --- eviction under a cap -------------------------------------------------------------------------
"$ENVMGR" state save $E1 s3 >/dev/null
touch "$ENVMGR_STATE_DIR/s2/.ram.flat-999999" # a flat file build that died
out=$("$ENVMGR" gc --keep-golden --state-cap 0 2>&1)
echo "$out" | grep state
check "gc under a zero cap evicts the unused state" test ! -e "$ENVMGR_STATE_DIR/s3"
check "and keeps s2 (envs run on it) and s1 (s2 needs it)" test -e "$ENVMGR_STATE_DIR/s2/state.json" -a -e "$ENVMGR_STATE_DIR/s1/state.json"
check "... but removes s1's flat RAM file first (derived; rebuilt at its next restore), saying so" \
    bash -c "test ! -e '$F1' && echo '$out' | grep -q 'flat RAM file of state s1'"
check "... and keeps s2's (envs run on s2)" test -e "$ENVMGR_STATE_DIR/s2/ram.flat"
check "... and the temp file of a build that died" test ! -e "$ENVMGR_STATE_DIR/s2/.ram.flat-999999"
"$ENVMGR" down $E2 >/dev/null; "$ENVMGR" down $E3 >/dev/null
out=$("$ENVMGR" gc --keep-golden --state-cap 0 2>&1)
check "once its envs are down, gc evicts s2 then s1" test ! -e "$ENVMGR_STATE_DIR/s2" -a ! -e "$ENVMGR_STATE_DIR/s1"
check "no leftovers in the state directory" test -z "$(ls -A "$ENVMGR_STATE_DIR")"
check "... no RAM server, no mount" server_gone "$ENVMGR_STATE_DIR/"

"$ENVMGR" down $E1 >/dev/null
check "no QEMU left behind" no_qemu_under "$ENVMGR_RUN_DIR/"
finish
