#!/usr/bin/env bash
# Honest runs on the apps image (issue 29), one `envmgr suite audit` of tests/data/apps-honest under TCG:
#   * a real OSWorld-Verified task with an evaluator.postconfig (chrome 030eeff7, copied unchanged: pkill
#     the browser, start it again, sleep, read its Preferences) runs end to end with the do-nothing
#     agent: no crash, its postconfig lines after the steps, an honest 0;
#   * a task whose goal the apps image already meets is found pre-satisfied by the audit;
#   * a setup `launch` of a program the image does not have is flagged, in results and the audit;
#   * a getter whose gsettings schema the image lacks, under `conj: or`, is flagged;
#   * eight OSWorld-Verified tasks the image once met without an agent or could not score (volume, time zone,
#     default video player, Chrome's delete-on-close, the `bc` text-scale getter, Impress's left panel whose
#     setup keys came before Impress was up, Do Not Disturb, GNOME Shell's favourites): each scores 0 with
#     the do-nothing agent, without a flag;
#     Impress's reference solution (tests/data/apps-honest-solutions) scores 1 through check_left_panel;
#   * a GNOME setting changed through the GUI (os/f9be0997, Do Not Disturb): GNOME Settings' switch, clicked;
#     GNOME Shell's favourites (os/ec4e3f68, remove vim), which no XFCE panel holds: dconf Editor's field.
# SKIPPED unless ENVMGR_APPS=1 (`make test-apps`). Prints `apps-honest: N passed, N failed`.
. "$(dirname "$0")/lib.sh"
SUITE=apps-honest
if [ "${ENVMGR_APPS:-0}" != 1 ]; then
    echo "apps-honest: skipped (set ENVMGR_APPS=1 to boot the apps image; ~10 min under TCG)"
    finish
    exit 0
fi
DATA=$ROOT/tests/data/apps-honest
OSW=030eeff7-b492-4218-b312-701ec99ee0cc
CONFORM="28cc3b7e-b194-4bc9-8353-d04c0f4d56d2 b6781586-6346-41cd-935a-a6b1487918fc 937087b6-f668-4ba6-9110-60682ee33441
         99146c54-4f37-4ab8-9327-5f3291665e1e 3ce045a0-877b-42aa-8d2c-b4a863336ab8 ef9d12bd-bcee-4ba0-a40e-918400f43ddf
         f9be0997-4b7c-45c5-b05c-4612b44a6118 ec4e3f68-9ea4-4c18-a5c9-69f89d1178b3"
for id in $OSW $CONFORM; do
    check "$id: the OSWorld task file is OSWorld-Verified's, unchanged (README.md's sha256)" \
        bash -c "grep -q \"\$(sha256sum '$DATA/$id.json' | cut -d' ' -f1)\" '$DATA/README.md'"
done

out=$("$ENVMGR" suite audit "$DATA" --image apps --solutions "$ROOT/tests/data/apps-honest-solutions" --out "$T/a" \
    --envs 1 --accel tcg --progress plain 2>"$T/audit.err")
rc=$?
echo "$out"
tail -3 "$T/audit.err"
check "the audit exits 1: something was found" test $rc = 1
check "it writes audit.json" test -s "$T/a/audit.json"
kinds() { python3 -c "import json,sys; a=json.load(open(sys.argv[1])); print(' '.join(sorted(f['kind'] for f in a['tasks'].get(sys.argv[2], {}).get('findings', []))))" "$T/a/audit.json" "$1"; }
# line ID: task ID's final line of the done pass's results.jsonl, as JSON
line() { python3 -c "
import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l)
    if r['task_id']==sys.argv[2] and r.get('final', True): print(json.dumps(r))" "$T/a/done/results.jsonl" "$1"; }

# --- (a) the real OSWorld task with a postconfig ---------------------------------------------------
r=$(line $OSW)
echo "$OSW: $r" | cut -c1-400
field() { printf '%s' "$1" | python3 -c "import json,sys; print(json.load(sys.stdin).get(sys.argv[1]))" "$2"; }
check "$OSW: no crash, evaluated: exit cause done" test "$(field "$r" exit_cause)" = done
check "$OSW: no evaluator_error" test "$(field "$r" status)" != evaluator_error
check "$OSW: the do-nothing agent scores an honest 0.0" test "$(field "$r" score)" = 0.0
check "$OSW: the audit finds neither a crash nor an evaluator_error" \
    bash -c "! echo '$(kinds $OSW)' | grep -qE 'crashed|evaluator_error'"
tr=$T/a/done/traces/$OSW/trace
check "$OSW: its trace verifies" "$ENVMGR" trace verify "$tr"
check "$OSW: 3 postconfig lines (pkill, launch, sleep) after the step lines, before the evaluation" \
    python3 - "$tr/trace.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
kinds = [l["type"] for l in lines if l["type"] in ("setup", "step", "postconfig", "evaluation")]
post = [l for l in lines if l["type"] == "postconfig"]
assert [p["step"]["type"] for p in post] == ["launch", "launch", "sleep"], post
last_step = max(i for i, k in enumerate(kinds) if k == "step")
assert kinds.index("postconfig") > last_step and kinds[-1] == "evaluation", kinds
EOF
check "$OSW: trace show lists the postconfig" bash -c "'$ENVMGR' trace show '$tr' | grep -qE '^postconfig: 3 steps'"

# --- (a2) OSWorld tasks that start unsolved on the apps image, and whose getters run ---------------
for id in $CONFORM; do
    r=$(line $id)
    check "$id: the do-nothing agent scores 0.0, not pre-satisfied, no flag ($(kinds $id))" \
        bash -c "[ '$(field "$r" score)' = 0.0 ] && [ '$(field "$r" flagged)' != True ] && [ -z '$(kinds $id)' ]"
done
check "ef9d12bd: the setup's launch waited for Impress's window" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"setup\"" in l]
w = s[0].get("detail", s[0]).get("window")
print("     launch waited for a window:", w)
sys.exit(0 if isinstance(w, (int, float)) else 1)' "$T/a/done/traces/ef9d12bd-bcee-4ba0-a40e-918400f43ddf/trace/trace.jsonl"

solved() { # solved ID: its reference solution's final result scores 1.0
    python3 -c "
import json,sys
r=[json.loads(l) for l in open(sys.argv[1])]
r=[x for x in r if x['task_id']==sys.argv[2] and x.get('final', True)]
print('     solution:', r and (r[-1].get('score'), r[-1].get('exit_cause')))
sys.exit(0 if r and r[-1].get('score') == 1.0 else 1)" "$T/a/solutions/results.jsonl" "$1"
}
check "ef9d12bd: the reference solution (View, Slide Pane) scores 1.0: check_left_panel reads the tree" \
    solved ef9d12bd-bcee-4ba0-a40e-918400f43ddf
check "f9be0997: a GNOME setting through the GUI: GNOME Settings' Do Not Disturb switch, clicked, scores 1.0" \
    solved f9be0997-4b7c-45c5-b05c-4612b44a6118
check "ec4e3f68: GNOME Shell's favourites through the GUI: dconf Editor's field for the key, edited, scores 1.0" \
    solved ec4e3f68-9ea4-4c18-a5c9-69f89d1178b3

# --- (b) pre-satisfied ------------------------------------------------------------------------------
check "honest-presatisfied: the audit says pre_satisfied ($(kinds honest-presatisfied))" \
    test "$(kinds honest-presatisfied)" = pre_satisfied
check "honest-presatisfied: doing nothing scored 1.0" test "$(field "$(line honest-presatisfied)" score)" = 1.0

# --- (c) a launch of a program missing on the image ----------------------------------------------
r=$(line honest-missing-launch)
check "honest-missing-launch: flagged ($(kinds honest-missing-launch)), scored 0.0 all the same" \
    bash -c "[ '$(kinds honest-missing-launch)' = flagged ] && [ '$(field "$r" flagged)' = True ] && [ '$(field "$r" score)' = 0.0 ]"
check "honest-missing-launch: the flag names the program, not found on the image" \
    bash -c "echo \"\$1\" | grep -q 'honest-missing-launch .*flagged .*envmgr-no-such-player.*not found on the image'" _ "$out"
check "honest-missing-launch: result.json's setup_flags say so too" python3 - "$T/a/done/traces/honest-missing-launch/result.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["setup_flags"]
assert r["flagged"] is True and len(f) == 1 and f[0]["type"] == "launch" and "envmgr-no-such-player" in f[0]["why"], r
EOF

# --- (d) a getter failure under conj or -----------------------------------------------------------
r=$(line honest-getter-or)
check "honest-getter-or: flagged ($(kinds honest-getter-or)), scored 0.0" \
    bash -c "[ '$(kinds honest-getter-or)' = flagged ] && [ '$(field "$r" flagged)' = True ] && [ '$(field "$r" score)' = 0.0 ]"
check "honest-getter-or: result.json's getter_flags name the missing schema on evaluator.result[0]" \
    python3 - "$T/a/done/traces/honest-getter-or/result.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["getter_flags"]
assert len(f) == 1 and f[0]["path"] == "evaluator.result[0]", f
assert "a GSettings schema the image lacks" in f[0]["why"] and "No such schema" in f[0]["why"], f
EOF
check "the done pass's summary counts both flagged episodes" python3 -c \
    "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['all']['flagged'] >= 2 else 1)" "$T/a/done/summary.json"
check "no QEMU of the audit is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish
