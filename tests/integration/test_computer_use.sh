#!/usr/bin/env bash
# Today's agents' action formats on a real desktop guest under TCG: every action kind of Anthropic's
# computer tool, OpenAI's computer-use tool and UI-TARS's action text, sent with `envmgr act`, checked
# by the X events a real X client in the guest receives (tests/tools/xrecorder.py: buttons, positions,
# modifiers, keys, how long a key was held), with the model's display scaled (1024x640 of 1280x800);
# the tools' answers (scaled screenshots, the cursor, a zoom); refusals that leave the guest untouched.
# Prints `N passed, N failed`.
SUITE=computer_use
source "$(dirname "$0")/lib.sh"

E=it-cu-1
PY=/usr/bin/python3
EVENTS="$PY $ROOT/tests/tools/input_events.py"

out=$("$ENVMGR" up --name $E --accel tcg 2>&1) || { bad "up $E: $out"; finish; exit 1; }
ok "up $E"

# The recorder: an override-redirect window over the whole screen, focused, logging every event.
"$ENVMGR" exec $E --stdin -- sh -c 'cat > /tmp/xrec.py' <"$ROOT/tests/tools/xrecorder.py"
"$ENVMGR" exec $E -- sh -c 'DISPLAY=:0 setsid -f python3 /tmp/xrec.py --override 0 0 1280 800 \
    >/tmp/rec.log 2>/tmp/rec.err </dev/null'
fetch_log() { "$ENVMGR" exec $E -- cat /tmp/rec.log >"$T/rec.log" 2>/dev/null; }
if ! wait_until 30 bash -c "'$ENVMGR' exec $E -- grep -q ready /tmp/rec.log"; then
    bad "the recorder window did not map: $("$ENVMGR" exec $E -- cat /tmp/rec.err)"
    finish
    exit 1
fi
ok "the recorder window is up"
check "the guest's USB tablet never autosuspends" \
    test "$("$ENVMGR" exec $E -- cat /sys/bus/usb/devices/1-1/power/control 2>/dev/null)" = on

lines() { fetch_log; wc -l <"$T/rec.log"; }
# expect NAME REPLY WANT: the events REPLY makes (input_events.py's summary) are exactly WANT
expect() {
    local name=$1 reply=$2 want=$3 from got
    from=$(lines)
    if ! out=$("$ENVMGR" act $E "$reply" 2>&1 >"$T/answer.json"); then
        bad "$name: act failed: $out"
        return
    fi
    got=
    for _ in $(seq 20); do
        fetch_log
        got=$($EVENTS "$T/rec.log" "$from")
        [ "$got" = "$want" ] && break
        sleep 0.5
    done
    check "$name ($got)" test "$got" = "$want"
}
A() { echo "{\"anthropic\": {\"type\": \"tool_use\", \"id\": \"toolu_$RANDOM\", \"name\": \"computer\", \"input\": $1}, \"display\": [1024, 640]}"; }
O() { echo "{\"openai\": {\"type\": \"computer_call\", \"call_id\": \"call_$RANDOM\", \"status\": \"completed\", $1}}"; }
U() { echo "{\"uitars\": \"$1\", \"display\": [1120, 700]}"; }

# --- Anthropic's computer tool, the model seeing 1024x640: display (x, y) is screen (x, y) * 1.25 -----
expect "anthropic left_click lands on the scaled pixel" "$(A '{"action": "left_click", "coordinate": [100, 100]}')" \
    "press1@125,125 release1@125,125"
expect "anthropic right_click" "$(A '{"action": "right_click", "coordinate": [200, 120]}')" \
    "press3@250,150 release3@250,150"
expect "anthropic middle_click" "$(A '{"action": "middle_click", "coordinate": [8, 8]}')" "press2@10,10 release2@10,10"
expect "anthropic double_click" "$(A '{"action": "double_click", "coordinate": [400, 300]}')" \
    "press1@500,375 release1@500,375 press1@500,375 release1@500,375"
sleep 2.5 # idle past the kernel's USB autosuspend delay (2 s): the tablet must still be awake
expect "anthropic triple_click with shift held" "$(A '{"action": "triple_click", "coordinate": [400, 300], "text": "shift"}')" \
    "down:Shift_L press1@500,375+shift release1@500,375+shift press1@500,375+shift release1@500,375+shift press1@500,375+shift release1@500,375+shift up:Shift_L"
sleep 2.5 # idle past the kernel's USB autosuspend delay (2 s): the tablet must still be awake
expect "anthropic left_click with ctrl+shift held" "$(A '{"action": "left_click", "coordinate": [4, 4], "text": "ctrl+shift"}')" \
    "down:Control_L down:Shift_L press1@5,5+shift+ctrl release1@5,5+shift+ctrl up:Shift_L up:Control_L"
sleep 2.5 # idle past the kernel's USB autosuspend delay (2 s): the tablet must still be awake
expect "anthropic left_click_drag from start_coordinate to coordinate" \
    "$(A '{"action": "left_click_drag", "start_coordinate": [80, 80], "coordinate": [160, 120]}')" \
    "press1@100,100 release1@200,150"
expect "anthropic left_mouse_down" "$(A '{"action": "left_mouse_down", "coordinate": [40, 40]}')" "press1@50,50"
expect "anthropic left_mouse_up after a mouse_move" "$(A '{"action": "left_mouse_up", "coordinate": [48, 40]}')" "release1@60,50"
expect "anthropic scroll down 3 at a point" \
    "$(A '{"action": "scroll", "coordinate": [512, 320], "scroll_direction": "down", "scroll_amount": 3}')" \
    "press5@640,400 release5@640,400 press5@640,400 release5@640,400 press5@640,400 release5@640,400"
# QEMU 7.2's tablet has no horizontal wheel: Shift with the vertical wheel, as apps read it (up is left)
expect "anthropic scroll left 1: Shift and the wheel up" "$(A '{"action": "scroll", "scroll_direction": "left", "scroll_amount": 1}')" \
    "down:Shift_L press4@640,400+shift release4@640,400+shift up:Shift_L"
expect "anthropic key ctrl+s" "$(A '{"action": "key", "text": "ctrl+s"}')" "down:Control_L down:s up:s up:Control_L"
expect "anthropic key with xdotool names, in sequence" "$(A '{"action": "key", "text": "Return Escape"}')" \
    "down:Return up:Return down:Escape up:Escape"
from=$(lines)
act $E "$(A '{"action": "type", "text": "Hi, envmgr!\n"}')" >/dev/null
wait_until 10 bash -c "'$ENVMGR' exec $E -- cat /tmp/rec.log | wc -l | grep -qv '^$from\$'"
sleep 1; fetch_log
check "anthropic type: the text arrives, Return included" test "$($EVENTS "$T/rec.log" "$from" --typed)" = '"Hi, envmgr!\n"'
from=$(lines)
act $E "$(A '{"action": "hold_key", "text": "shift", "duration": 1}')" >/dev/null
sleep 1; fetch_log
held=$($EVENTS "$T/rec.log" "$from" --held Shift_L)
check "anthropic hold_key holds shift for its duration ($held ms)" test "$held" -ge 900 -a "$held" -le 2500

# mouse_move, then cursor_position answers where the pointer is, in the model's display pixels
act $E "$(A '{"action": "mouse_move", "coordinate": [512, 320]}')" >/dev/null
act $E "$(A '{"action": "cursor_position"}')" >"$T/cursor.json"
check "anthropic cursor_position answers a tool_result with the display position" $PY -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["type"] == "tool_result" and a["tool_use_id"].startswith("toolu_"), a
assert a["content"] == [{"type": "text", "text": "X=512,Y=320"}], a' "$T/cursor.json"
act $E "$(A '{"action": "screenshot"}')" >"$T/shot.json"
b64png() { $PY -c '
import base64, json, sys
a = json.load(open(sys.argv[1]))
if "output" in a:
    data = a["output"]["image_url"].split(",", 1)[1]
else:
    data = a["content"][0]["source"]["data"]
open(sys.argv[2], "wb").write(base64.b64decode(data))' "$1" "$2"; }
b64png "$T/shot.json" "$T/shot.png"
check "anthropic screenshot answers the screen scaled to the display (1024x640)" \
    test "$("$PNGTOOL" info "$T/shot.png" | cut -d" " -f1-2)" = "1024 640"
act $E "$(A '{"action": "zoom", "region": [0, 0, 512, 320]}')" >"$T/zoom.json"
b64png "$T/zoom.json" "$T/zoom.png"
check "anthropic zoom answers the region enlarged to the display" test "$("$PNGTOOL" info "$T/zoom.png" | cut -d" " -f1-2)" = "1024 640"
from=$(lines)
act $E "$(A '{"action": "wait", "duration": 0.5}')" >/dev/null
fetch_log
check "anthropic wait sends nothing" test -z "$($EVENTS "$T/rec.log" "$from")"

# --- OpenAI's computer-use tool: screen pixels ----------------------------------------------------
expect "openai click left" "$(O '"action": {"type": "click", "button": "left", "x": 300, "y": 200}')" \
    "press1@300,200 release1@300,200"
expect "openai click right" "$(O '"action": {"type": "click", "button": "right", "x": 301, "y": 201}')" \
    "press3@301,201 release3@301,201"
expect "openai click wheel (the middle button)" "$(O '"action": {"type": "click", "button": "wheel", "x": 302, "y": 202}')" \
    "press2@302,202 release2@302,202"
expect "openai click back: the browser-back key" "$(O '"action": {"type": "click", "button": "back", "x": 303, "y": 203}')" \
    "down:XF86_Back up:XF86_Back"
expect "openai click forward: the browser-forward key" "$(O '"action": {"type": "click", "button": "forward", "x": 303, "y": 203}')" \
    "down:XF86_Forward up:XF86_Forward"
expect "openai double_click" "$(O '"action": {"type": "double_click", "x": 640, "y": 400}')" \
    "press1@640,400 release1@640,400 press1@640,400 release1@640,400"
expect "openai drag along a path" \
    "$(O '"action": {"type": "drag", "path": [{"x": 100, "y": 100}, {"x": 150, "y": 120}, {"x": 200, "y": 140}]}')" \
    "press1@100,100 release1@200,140"
expect "openai keypress CTRL+A is ctrl+a" "$(O '"action": {"type": "keypress", "keys": ["CTRL", "A"]}')" \
    "down:Control_L down:a up:a up:Control_L"
expect "openai scroll 200 px down at a point: 2 notches" \
    "$(O '"action": {"type": "scroll", "x": 700, "y": 500, "scroll_x": 0, "scroll_y": 200}')" \
    "press5@700,500 release5@700,500 press5@700,500 release5@700,500"
expect "openai scroll left: Shift and the wheel up" "$(O '"action": {"type": "scroll", "x": 700, "y": 500, "scroll_x": -100, "scroll_y": 0}')" \
    "down:Shift_L press4@700,500+shift release4@700,500+shift up:Shift_L"
expect "openai move then a batch of actions in one call" \
    "$(O '"actions": [{"type": "move", "x": 10, "y": 11}, {"type": "click", "button": "left", "x": 10, "y": 11}, {"type": "type", "text": "ok"}]')" \
    "press1@10,11 release1@10,11 down:o up:o down:k up:k"
expect "computer_13 HOTKEY with a capital: Shift around it, no Caps Lock" '{"action_type": "HOTKEY", "keys": ["ctrl", "A"]}' \
    "down:Control_L down:Shift_L down:A up:Shift_L up:a up:Control_L"
from=$(lines)
act $E "$(O '"action": {"type": "wait"}')" >/dev/null
fetch_log
check "openai wait sends nothing" test -z "$($EVENTS "$T/rec.log" "$from")"
act $E "$(O '"action": {"type": "screenshot"}')" >"$T/oshot.json"
check "openai screenshot answers a computer_call_output with the call_id" $PY -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert a["type"] == "computer_call_output" and a["call_id"].startswith("call_"), a
assert a["output"]["type"] == "computer_screenshot" and a["output"]["image_url"].startswith("data:image/png;base64,")' "$T/oshot.json"
b64png "$T/oshot.json" "$T/oshot.png"
check "openai screenshot is the whole screen (1280x800)" test "$("$PNGTOOL" info "$T/oshot.png" | cut -d" " -f1-2)" = "1280 800"

# --- UI-TARS's action text, the model seeing 1120x700 (sides multiples of 28: the image UI-TARS-1.5's
# processor sees is the one sent): display (x, y) is screen ((x + 0.5) * 8/7) -------------------------
expect "uitars click(start_box)" "$(U "click(start_box='(100,100)')")" "press1@114,114 release1@114,114"
expect "uitars left_double" "$(U "left_double(start_box='(400,300)')")" \
    "press1@457,343 release1@457,343 press1@457,343 release1@457,343"
expect "uitars right_single" "$(U "right_single(start_box='(200,120)')")" "press3@229,137 release3@229,137"
expect "uitars drag(start_box, end_box)" "$(U "drag(start_box='(80,80)', end_box='(160,120)')")" \
    "press1@92,92 release1@183,137"
expect "uitars hotkey(key='ctrl c')" "$(U "hotkey(key='ctrl c')")" "down:Control_L down:c up:c up:Control_L"
expect "uitars relative_1000 coordinates" \
    "{\"uitars\": \"click(start_box='(500,500)')\", \"coords\": \"relative_1000\"}" "press1@640,400 release1@640,400"

# --- refusals: one line naming the field, exit 2, nothing reaches the guest --------------------------
from=$(lines)
refuse() {
    local name=$1 reply=$2 field=$3 rc
    out=$("$ENVMGR" act $E "$reply" 2>&1 >/dev/null); rc=$?
    check "$name: exit 2, one line naming $field ($out)" \
        bash -c "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && grep -qF -- '$field' <<<\"\$1\"" _ "$out"
}
refuse "anthropic coordinate off the display" "$(A '{"action": "left_click", "coordinate": [1024, 0]}')" "input.coordinate"
refuse "anthropic unknown action" "$(A '{"action": "teleport"}')" "input.action"
refuse "anthropic text not on a US keyboard" "$(A '{"action": "type", "text": "caf\u00e9"}')" "input.text"
refuse "openai unknown button" "$(O '"action": {"type": "click", "button": "side", "x": 1, "y": 1}')" "action.button"
refuse "openai batch with one bad action" "$(O '"actions": [{"type": "move", "x": 1, "y": 1}, {"type": "move", "x": 9999, "y": 1}]')" "actions[1]"
refuse "uitars unknown action" "$(U "teleport(start_box='(1,1)')")" "uitars"
refuse "a display larger than twice the screen" '{"anthropic": {"action": "screenshot"}, "display": [4000, 4000]}' "display"
sleep 1; fetch_log
check "refused replies sent nothing to the guest" test -z "$($EVENTS "$T/rec.log" "$from")"

"$ENVMGR" down $E >/dev/null 2>&1

# --- whole episodes from the vendors' transcripts (tests/data/computer-use/): the CLI's stdio agent ----
FIX=$ROOT/tests/data/computer-use
TASK=$ROOT/tasks/demo/terminal-mkdir-tree.json
for space in anthropic openai uitars; do
    F=$FIX/$space-terminal-mkdir-tree.json
    out=$("$ENVMGR" run "$TASK" --accel tcg --out "$T/run-$space" \
        --agent "$ROOT/tasks/agents/scripted --transcript $F --observations $T/obs-$space.jsonl" 2>&1)
    score=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["score"])' "$T/run-$space/result.json" 2>/dev/null)
    check "$space transcript through envmgr run scores 1.0 (${score:-none})" test "$score" = 1.0
    tr=$T/run-$space/trace
    check "$space: the trace verifies" bash -c "'$ENVMGR' trace verify '$tr' >/dev/null"
    check "$space: each reply's steps name its space and keep the call as sent" $PY -c '
import json, sys
space, fix = sys.argv[2], json.load(open(sys.argv[3]))
steps = [json.loads(l) for l in open(sys.argv[1] + "/trace.jsonl") if "\"type\":\"step\"" in l]
sent = [s[space] for s in steps if space in s]
calls = [c for c in fix["calls"] if not (isinstance(c, dict) and "action_type" in c)]
assert sent == calls, (sent, calls)
assert all(s["source"] == space for s in steps if space in s)
assert all(s.get("display") == fix.get("display") for s in steps if space in s)' "$tr" $space "$F"
    [ $space = uitars ] || check "$space: the agent got the tool's answer with each observation after a call" $PY -c '
import json, sys
space = sys.argv[2]
obs = [json.loads(l) for l in open(sys.argv[1])]
answers = [o["answer"] for o in obs if "answer" in o]
want = "tool_result" if space == "anthropic" else "computer_call_output"
assert len(answers) == len(obs) - 1 and all(a["type"] == want for a in answers), answers' "$T/obs-$space.jsonl" $space
done
out=$("$ENVMGR" replay "$T/run-anthropic/trace" --out "$T/replay-anthropic" 2>&1)
check "the anthropic episode replays step for step" grep -q "REPRODUCED" <<<"$out"

# --- the same transcripts through envmgr serve: raw HTTP and the Python client ---------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" --out "$T/serve-out" --task-root "$ROOT/tasks" \
    --accel tcg >"$T/serve.out" 2>"$T/serve.err" &
SERVE=$!
if wait_until 20 grep -q 'token file' "$T/serve.out"; then
    URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
    tally api < <(PYTHONDONTWRITEBYTECODE=1 timeout 900 $PY "$ROOT/tests/tools/computer_use_api_check.py" "$URL" \
        "$(cat "$T/token")" "$FIX" "$ROOT/clients/python" 2>&1)
    for v in claude openai; do
        F=$FIX/$([ $v = claude ] && echo anthropic || echo openai)-terminal-mkdir-tree.json
        out=$(timeout 600 $PY "$ROOT/clients/python/examples/${v}_computer_use.py" "$URL" "$(cat "$T/token")" \
            demo/terminal-mkdir-tree.json --transcript "$F" 2>&1)
        check "docs/$v-computer-use.md's example runs and scores 1.0 ($(tail -1 <<<"$out"))" grep -qx "score 1.0" <<<"$out"
    done
else
    bad "envmgr serve did not start: $(cat "$T/serve.err")"
fi
kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null

check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish
