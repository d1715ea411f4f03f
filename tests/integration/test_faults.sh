#!/usr/bin/env bash
# Faults in the middle of things (docs/security.md, "When an operation dies half-way"): a state
# removed while an env restores it (both RAM modes), an env whose QEMU died brought back by reset
# (CLI and HTTP), a request answered with an error that did nothing, a program's own exit status
# told apart from envmgr's timeout, and a table of faults injected into each long operation (envmgr,
# QEMU, the RAM server or the guest agent killed at several points), each cell checked against the
# invariants: no state lost or half-used, the env usable or brought back by `reset`, no QEMU left
# behind, no score for an episode that did not finish, `gc` leaves nothing. Prints the table and
# `faults: N passed, N failed`. ENVMGR_FAULT_RUNS (default 3) sets the races per RAM mode.
SUITE=faults
source "$(dirname "$0")/lib.sh"

RUNS=${ENVMGR_FAULT_RUNS:-3}
F=it-f-1 G=it-f-2
AG=$ROOT/tasks/agents
TASK=$ROOT/tasks/demo/terminal-mkdir-tree.json
TABLE=$T/table.txt
printf '%-28s %-34s %s\n' "operation" "fault" "outcome" >"$TABLE"

state_exists() { [ -f "$ENVMGR_STATE_DIR/$1/state.json" ]; }
alive() { timeout 60 "$ENVMGR" exec "$1" -- true >/dev/null 2>&1; }
qemu_pid() { cat "$ENVMGR_RUN_DIR/$1/qemu.pid" 2>/dev/null; }
# the pid of the newest envmgr process whose command line holds WORDS (the CLI under test)
envmgr_pid() { pgrep -n -f -- "$1"; }
gone() { [ ! -e "$ENVMGR_RUN_DIR/$1" ] && no_qemu_under "$ENVMGR_RUN_DIR/$1/"; }
one_line() { [ "$(wc -l <"$1")" -le 1 ]; }
# QEMUs under this run's directory, and envs whose QEMU runs: equal when no QEMU was left behind
qemus() { pgrep -a -f -- "$ENVMGR_RUN_DIR/" | grep -c '^[0-9]* qemu-system'; }
running_envs() { "$ENVMGR" ls --json | python3 -c "import json,sys; print(sum(r['status']!='dead' for r in json.load(sys.stdin)))"; }
ls_status() { "$ENVMGR" ls --json | python3 -c "import json,sys; print([r['status'] for r in json.load(sys.stdin) if r['name']=='$1'][0])"; }
qmp_status() { qmp_return "$1" query-status | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
states_sound() { # every state listed reads as sound (no damaged row), base0 and ff among them
    "$ENVMGR" state ls --json | python3 -c "
import json, sys
rows = json.load(sys.stdin)
names = {r['name'] for r in rows if 'error' not in r}
sys.exit(0 if all('error' not in r for r in rows) and {'base0', 'ff'} <= names else 1)"; }

out=$("$ENVMGR" up --name $F --accel tcg 2>&1) && ok "up $F" || { bad "up $F: $out"; finish; exit 1; }
"$ENVMGR" state save $F base0 >/dev/null && "$ENVMGR" state restore $F base0 >/dev/null &&
    "$ENVMGR" state save $F ff >/dev/null
check "states base0 and ff (a child of base0) saved" states_sound

# --- B4: a program's own exit status is not envmgr's timeout ---------------------------------------
for code in 124 137; do
    out=$("$ENVMGR" exec $F -- sh -c "exit $code" 2>&1); rc=$?
    check "exit $code of the program itself is its status ($rc), not a timeout" \
        bash -c "[ $rc = $code ] && ! grep -q 'timed out' <<<'$out'"
done
out=$("$ENVMGR" exec $F -- sh -c 'kill -9 $$' 2>&1); rc=$?
check "a program killed by a signal at once is not a timeout ($rc)" bash -c "[ $rc = 137 ] && ! grep -q 'timed out' <<<'$out'"
out=$("$ENVMGR" exec $F --timeout 2 -- sleep 30 2>&1); rc=$?
check "envmgr's own timeout is still said as one ($rc)" bash -c "[ $rc != 0 ] && grep -q 'timed out after 2 s' <<<'$out'"

# --- B1: a state removed while an env restores it ---------------------------------------------------
# The restore holds the state from before it stops the env's QEMU until the env is its user: the
# removal waits, then is refused (the env runs on it); or it came first, and the restore is refused
# before anything stopped.
race_rm() {
    local mode=$1 order=$2 rmrc rsrc
    "$ENVMGR" state restore $F base0 >/dev/null 2>&1 || { echo "restore base0 failed"; return 1; }
    state_exists ff || "$ENVMGR" state save $F ff >/dev/null 2>&1 || { echo "save ff failed"; return 1; }
    if [ "$order" = restore-first ]; then
        ( ENVMGR_STATE_RAM=$mode "$ENVMGR" state restore $F ff >"$T/race.restore" 2>&1; echo $? >"$T/race.rc" ) &
        sleep 0.08
        "$ENVMGR" state rm ff >"$T/race.rm" 2>&1; rmrc=$?
    else
        ( "$ENVMGR" state rm ff >"$T/race.rm" 2>&1; echo $? >"$T/race.rmrc" ) &
        sleep 0.01
        ENVMGR_STATE_RAM=$mode "$ENVMGR" state restore $F ff >"$T/race.restore" 2>&1; echo $? >"$T/race.rc"
    fi
    wait
    [ "$order" = restore-first ] || rmrc=$(cat "$T/race.rmrc")
    rsrc=$(cat "$T/race.rc")
    alive $F || { echo "env dead: restore said $(cat "$T/race.restore"), rm said $(cat "$T/race.rm")"; return 1; }
    one_line "$T/race.rm" && one_line "$T/race.restore" || { echo "more than one line"; return 1; }
    if [ "$rmrc" = 0 ]; then # removed first: the restore was refused, saying so
        ! state_exists ff && [ "$rsrc" != 0 ] && grep -qE 'does not exist|was removed' "$T/race.restore" ||
            { echo "rm won but: restore $rsrc $(cat "$T/race.restore")"; return 1; }
        echo first
    else # restored first: the state is there, the env on it, the removal refused naming why
        state_exists ff && [ "$rsrc" = 0 ] && grep -q 'in use' "$T/race.rm" ||
            { echo "restore won but: rm $rmrc $(cat "$T/race.rm"), restore $rsrc $(cat "$T/race.restore")"; return 1; }
        echo waited
    fi
}
for race in "file restore-first" "served restore-first" "served rm-first"; do
    set -- $race
    good=0 first=0 why=
    for i in $(seq "$RUNS"); do
        r=$(race_rm $1 $2) && good=$((good + 1)) || why=$r
        [ "$r" = first ] && first=$((first + 1))
    done
    check "B1 ($1 RAM, $2): state rm against a restore of it, $RUNS runs: the env survived and the state is whole every time ($good; rm first $first)${why:+: $why}" \
        test "$good" = "$RUNS"
    printf '%-28s %-34s %s\n' "state restore ($1)" "state rm, $2, x$RUNS" "$good/$RUNS env kept ($first rm went first: restore refused)" >>"$TABLE"
done
state_exists ff || "$ENVMGR" state save $F ff >/dev/null 2>&1

# --- the table: a fault at each point of each operation -------------------------------------------
# cell OP FAULT OUTCOME-CHECKS: one row. recover brings F back if it is not usable (reset), and
# says how; any invariant broken fails the cell.
recover() {
    if alive $F; then echo usable; return 0; fi
    "$ENVMGR" reset $F >/dev/null 2>&1 && alive $F && { echo "dead, back by reset"; return 0; }
    echo "BROKEN: $F neither usable nor brought back by reset"; return 1
}
invariants() { # after a cell: the states whole, no QEMU beyond the envs that run
    states_sound || { echo "a state was damaged or lost"; return 1; }
    local q e; q=$(qemus); e=$(running_envs)
    [ "$q" = "$e" ] || { echo "$q QEMUs for $e running envs"; return 1; }
}
row() { # OP FAULT: run recover + invariants, record the outcome
    local op=$1 fault=$2 how inv rc=0
    how=$(recover) || rc=1
    inv=$(invariants) || { rc=1; how="$how; $inv"; }
    printf '%-28s %-34s %s\n' "$op" "$fault" "$how" >>"$TABLE"
    check "fault: $op, $fault: $how" test $rc = 0
}
# kill_after MS TARGET CMD...: run CMD in the background, kill TARGET (envmgr: the command itself;
# qemu: F's QEMU; ramfs: the servers of saved states' RAM) MS after it started, wait for it
kill_after() {
    local ms=$1 target=$2; shift 2
    "$@" >"$T/cell.out" 2>&1 &
    local pid=$!
    sleep "$(awk "BEGIN{print $ms/1000}")"
    case $target in
        envmgr) kill -9 $pid 2>/dev/null ;;
        qemu) kill -9 "$(qemu_pid $F)" 2>/dev/null ;;
        ramfs) pkill -9 -f -- "__ramfs $ENVMGR_STATE_DIR/" ;;
    esac
    wait $pid 2>/dev/null
    return 0
}

for ms in 20 150 600; do
    kill_after $ms envmgr "$ENVMGR" reset $F
    row "reset" "envmgr killed at $ms ms"
done
kill_after 100 qemu "$ENVMGR" reset $F; row "reset" "QEMU killed at 100 ms"
kill -9 "$(qemu_pid $F)"; sleep 0.5; row "(idle env)" "QEMU killed, then reset"
for ms in 20 150 600; do
    kill_after $ms envmgr "$ENVMGR" state restore $F ff
    row "state restore" "envmgr killed at $ms ms"
done
kill_after 150 qemu "$ENVMGR" state restore $F ff; row "state restore" "QEMU killed at 150 ms"
ENVMGR_STATE_RAM=served kill_after 100 ramfs "$ENVMGR" state restore $F ff
row "state restore (served)" "RAM server killed at 100 ms"
ENVMGR_STATE_RAM=served "$ENVMGR" state restore $F ff >/dev/null 2>&1
pkill -9 -f -- "__ramfs $ENVMGR_STATE_DIR/"
t0=$SECONDS
timeout 60 "$ENVMGR" exec $F -- sh -c 'head -c 200000000 /dev/zero | tail -c 1 >/dev/null' >"$T/ramkill.out" 2>&1
rc=$? secs=$((SECONDS - t0))
check "a RAM server killed under a running env: the next command works or says why within 15 s ($rc, $secs s: $(head -c 300 "$T/ramkill.out"))" \
    bash -c "[ $rc = 0 ] || { [ $secs -le 15 ] && grep -qE 'RAM|QEMU (died|is not running)' '$T/ramkill.out'; }"
row "(env on a served state)" "RAM server killed, then a command"
# a guest whose RAM server died runs only on the pages already in memory: reset it (docs/states.md)
"$ENVMGR" reset $F >/dev/null 2>&1
kill_after 150 envmgr "$ENVMGR" state save $F tmp-save
st=$(ls_status $F) q=$(qmp_status $F)
check "save killed mid-way: ls says what QEMU says of the guest (ls $st, QEMU $q)" \
    bash -c "[ '$st' = paused -a '$q' = paused ] || [ '$st' = running -a '$q' = running ]"
state_exists tmp-save && "$ENVMGR" state rm tmp-save >/dev/null 2>&1
for ms in 30 200 800; do
    kill_after $ms envmgr "$ENVMGR" state save $F tmp-save
    row "state save" "envmgr killed at $ms ms"
    state_exists tmp-save && "$ENVMGR" state rm tmp-save >/dev/null 2>&1
done
kill_after 200 qemu "$ENVMGR" state save $F tmp-save; row "state save" "QEMU killed at 200 ms"
state_exists tmp-save && "$ENVMGR" state rm tmp-save >/dev/null 2>&1
for ms in 5 40; do
    "$ENVMGR" state save $F victim >/dev/null 2>&1
    kill_after $ms envmgr "$ENVMGR" state rm victim
    row "state rm" "envmgr killed at $ms ms"
    state_exists victim && "$ENVMGR" state rm victim >/dev/null 2>&1
done
for ms in 100 500; do
    kill_after $ms envmgr "$ENVMGR" up --name $G --from-state ff
    "$ENVMGR" down $G >/dev/null 2>&1
    check "up killed at $ms ms: down cleans up after it" gone $G
    row "up --from-state" "envmgr killed at $ms ms, then down"
done
kill_after 300 envmgr "$ENVMGR" exec $F -- sh -c 'pkill -9 -x qemu-ga; sleep 5'
row "exec" "guest agent killed in the guest"

# an episode: envmgr killed during the setup, and the QEMU killed while the agent acts
EP=(run "$TASK" --env $F --agent "$AG/scripted --tasks $TASK" --accel tcg)
kill_after 1500 envmgr "$ENVMGR" "${EP[@]}" --out "$T/ep1"
check "episode killed in its setup: no score written" test ! -e "$T/ep1/result.json"
row "episode (run --env)" "envmgr killed at 1.5 s (setup)"
kill_after 4000 qemu "$ENVMGR" "${EP[@]}" --out "$T/ep2"
check "episode whose QEMU died: no score, status says why" python3 -c "
import json, sys
r = json.load(open('$T/ep2/result.json'))
sys.exit(0 if r['status'] != 'scored' and r['score'] in (None, 0) else 1)"
row "episode (run --env)" "QEMU killed at 4 s (agent acting)"

# envmgr killed once the agent said DONE: during postconfig and the evaluation
"$ENVMGR" run "$TASK" --env $F --agent "$AG/null" --accel tcg --out "$T/ep3" >"$T/ep3.log" 2>&1 &
epid=$!
wait_until 120 grep -q '"DONE"' "$T/ep3/trace/trace.jsonl"
kill -9 $epid 2>/dev/null; wait $epid 2>/dev/null
check "episode killed in its evaluation: no result.json, no score" test ! -e "$T/ep3/result.json"
check "... and its trace says it is incomplete (trace verify fails)" bash -c "! '$ENVMGR' trace verify '$T/ep3/trace' >/dev/null 2>&1"
row "evaluation (run --env)" "envmgr killed after DONE"

# a suite worker whose QEMU is killed mid-episode retries it on a fresh env; a killed suite resumes
mkdir -p "$T/suite" && cp "$TASK" "$T/suite/"
"$ENVMGR" suite run "$T/suite" --agent "$AG/scripted --tasks $T/suite" --envs 1 --accel tcg --out "$T/s1" \
    --progress plain >"$T/s1.log" 2>&1 &
spid=$!
wait_until 120 bash -c "pgrep -f -- '$ENVMGR_RUN_DIR/suite-$spid-0/' | head -1 | grep -q . && grep -q 'start' '$T/s1.log'"
sleep 4
pkill -9 -f -- "qemu-system.*$ENVMGR_RUN_DIR/suite-$spid-0/"
wait $spid; src=$?
check "suite: a worker's QEMU killed mid-episode is retried and the task scored 1.0 (exit $src)" \
    test "$(score_of "$T/s1" terminal-mkdir-tree)" = 1.0
printf '%-28s %-34s %s\n' "suite worker" "QEMU killed at 4 s" "retried: score $(score_of "$T/s1" terminal-mkdir-tree)" >>"$TABLE"
"$ENVMGR" suite run "$T/suite" --agent "$AG/scripted --tasks $T/suite" --envs 1 --accel tcg --out "$T/s2" \
    --progress plain >"$T/s2.log" 2>&1 &
spid=$!
wait_until 120 grep -q 'start' "$T/s2.log"
sleep 3
kill -9 $spid; wait $spid 2>/dev/null
check "suite killed mid-episode: no result line for the episode it did not finish" \
    bash -c "! grep -q terminal-mkdir-tree '$T/s2/results.jsonl' 2>/dev/null"
"$ENVMGR" gc >/dev/null 2>&1 # the dead suite's env and QEMU
"$ENVMGR" suite run "$T/suite" --agent "$AG/scripted --tasks $T/suite" --envs 1 --accel tcg --out "$T/s2" \
    --resume --progress plain >"$T/s2b.log" 2>&1
check "... and --resume runs it to its score" test "$(score_of "$T/s2" terminal-mkdir-tree)" = 1.0
printf '%-28s %-34s %s\n' "suite run" "envmgr killed at 3 s, --resume" "resumed: score $(score_of "$T/s2" terminal-mkdir-tree)" >>"$TABLE"

# --- gc and an env's cgroup in the moment before its new QEMU joins it -----------------------------
# F's cgroup: the pids controller's (cgroup v1), else the unified one (v2)
cg=$(awk -F: '$2 ~ /(^|,)pids(,|$)/ {print "/sys/fs/cgroup/pids" $3}' "/proc/$(qemu_pid $F)/cgroup" 2>/dev/null)
[ -n "$cg" ] || cg=$(awk -F: '$1 == "0" && $2 == "" {print "/sys/fs/cgroup" $3}' "/proc/$(qemu_pid $F)/cgroup" 2>/dev/null)
if [ -n "$cg" ] && [ -d "$cg" ] && case $(basename "$cg") in e*) true ;; *) false ;; esac; then
    # an env between its QEMUs: its run directory (locked by the envmgr at work) and its empty cgroup
    starting=$ENVMGR_RUN_DIR/it-f-starting
    young=$(dirname "$cg")/e$(printf '%s' "$starting" | sha256sum | cut -c1-16)
    mkdir -p "$starting" "$young"
    flock "$starting/lock" sleep 30 &
    holder=$!
    sleep 0.3
    "$ENVMGR" gc --keep-golden --keep-states >/dev/null 2>&1
    check "gc leaves the empty cgroup of an env between its QEMUs (the next one joins it)" test -d "$young"
    kill $holder 2>/dev/null; wait $holder 2>/dev/null
    rm -rf "$starting"
    "$ENVMGR" gc --keep-golden --keep-states >/dev/null 2>&1
    check "... and removes it once the env is gone" test ! -d "$young"
else
    echo "note: QEMU runs in no cgroup of its own here: the cgroup check is skipped"
fi

# --- gc after all of it: nothing left behind ------------------------------------------------------
"$ENVMGR" gc --keep-golden >"$T/gc.out" 2>&1
check "gc: no interrupted save or removal left in the states' folder" \
    bash -c "! ls -a '$ENVMGR_STATE_DIR' | grep -qE '^\.(new|rm)-'"
check "gc: the states are whole" states_sound
check "gc: no QEMU beyond the envs that run" test "$(qemus)" = "$(running_envs)"
check "gc: says no eviction it did not do" bash -c "! grep -q 'evict' '$T/gc.out'"
"$ENVMGR" state restore $F ff >/dev/null 2>&1 # ff in use, base0 its parent: neither may go
ENVMGR_STATE_CAP_MIB=1 "$ENVMGR" gc --keep-golden >"$T/gc-cap.out" 2>&1
check "gc over the cap: the states in use stay" states_sound
check "... and it warns that the cache is still over its cap" grep -q 'over their cap of 1 MiB' "$T/gc-cap.out"
"$ENVMGR" reset $'bad\e[31mname' 2>"$T/ctl.err"
no_escape_byte() { ! grep -q $'\e' "$1"; }
check "a control byte in a name is shown escaped in the error ($(cat "$T/ctl.err"))" grep -qF 'bad\x1b[31mname' "$T/ctl.err"
check "... and never sent to the terminal" no_escape_byte "$T/ctl.err"

# --- B2, B3 over HTTP ------------------------------------------------------------------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" --out "$T/out" --task-root "$ROOT/tasks" --accel tcg \
    >"$T/serve.out" 2>"$T/serve.err" &
SERVE=$!
wait_until 20 grep -q 'listening on' "$T/serve.out"
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
TOKEN=$(cat "$T/token")
api() { # METHOD PATH [BODY]: prints the status, the body in $T/api.json
    curl -s -o "$T/api.json" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN" ${3:+-d "$3"} "$URL$2"
}
field() { python3 -c "import json,sys; d=json.load(open('$T/api.json')); print(eval(sys.argv[1]))" "$1"; }
check "api: create an env" test "$(api POST /v1/envs '{"image": "desktop"}')" = 201
ID=$(field 'd["id"]')
check "api: reset" test "$(api POST /v1/envs/$ID/reset '{}')" = 200
kill -9 "$(qemu_pid "$ID")"
sleep 0.5
code=$(api POST /v1/envs/$ID/step '{"action": {"action_type": "MOVE_TO", "x": 30, "y": 30}}')
check "a step on an env whose QEMU died: 200, done, env_error saying the QEMU died ($code)" \
    bash -c "[ $code = 200 ] && python3 -c \"import json,sys; d=json.load(open('$T/api.json')); sys.exit(0 if d['done'] and d['info']['exit_cause'] == 'env_error' and 'QEMU died' in d['info']['error'] else 1)\""
check "B2: after kill -9 of its QEMU, reset answers 200" test "$(api POST /v1/envs/$ID/reset '{}')" = 200
check "B2: ... and the next step works" bash -c "[ \"\$(curl -s -o '$T/api.json' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"action\": {\"action_type\": \"MOVE_TO\", \"x\": 10, \"y\": 10}}' '$URL/v1/envs/$ID/step')\" = 200 ] && grep -q '\"done\": *false' '$T/api.json'"
code=$(api POST /v1/envs/$ID/step '{"action": {"pyautogui": "raise ValueError(\"agent bug\")"}}')
check "a step whose pyautogui code failed in the guest: 200 with info.agent_error, the episode goes on" \
    bash -c "[ $code = 200 ] && python3 -c \"import json,sys; d=json.load(open('$T/api.json')); sys.exit(0 if d['info'].get('agent_error') and not d['done'] else 1)\""
code=$(api POST /v1/envs/$ID/reset '{"observation": "screenshot_a11y_tree"}')
check "B3: a reset whose observation cannot be had (no accessibility bus here) is an error ($code)" test "$code" != 200
for i in 1 2; do
    code=$(api POST /v1/envs/$ID/step '{"action": {"action_type": "MOVE_TO", "x": 20, "y": 20}}')
    check "B3: a step after that failed reset is refused ($code), never run" test "$code" = 409
done
api GET /v1/envs/$ID >/dev/null
check "B3: the env counts no step" python3 -c "
import json, sys
d = json.load(open('$T/api.json'))
sys.exit(0 if (d.get('episode') or {}).get('steps', 0) == 0 else 1)"
last=$(ls -d "$T"/out/$ID/*/ | sort -V | tail -1)
check "B3: the failed reset's trace has no step line" bash -c "! grep -q '\"type\": *\"step\"' '$last/trace/trace.jsonl'"
check "api: delete the env" test "$(api DELETE /v1/envs/$ID)" = 200
kill $SERVE; wait $SERVE 2>/dev/null

"$ENVMGR" down $F >/dev/null 2>&1
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
echo
cat "$TABLE"
finish
