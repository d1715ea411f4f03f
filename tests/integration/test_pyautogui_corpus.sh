#!/usr/bin/env bash
# The agents' action corpus (tests/data/pyautogui_corpus, issue 31) in a real guest: every string runs
# with the toolbelt's pyautogui as envmgr's env_act runs agent code, and ends as OSWorld's python
# ends it (ok, or the same exception: SyntaxError, IndentationError, NameError, AttributeError).
# The host side (each string translated or sent to the guest, never refused) is the unit test
# test_pyautogui's corpus case. Style "real" lines are action strings from published OSWorld runs, each
# with its "source" (repo@commit:path step). Prints `pyautogui_corpus: N passed, N failed`.
SUITE=pyautogui_corpus
source "$(dirname "$0")/lib.sh"
CORPUS=$ROOT/tests/data/pyautogui_corpus/corpus.jsonl
E=it-corpus
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
check "the corpus has at least 200 strings" test "$(wc -l <"$CORPUS")" -ge 200
"$ENVMGR" exec $E --stdin --timeout 600 -- runuser -u user -- env DISPLAY=:0 HOME=/home/user \
    python3 -c "$(cat "$ROOT/tests/tools/pyautogui_corpus_guest.py")" <"$CORPUS" >"$T/outcomes" 2>"$T/err"
check "the guest ran the whole corpus" test "$(wc -l <"$T/outcomes")" = "$(wc -l <"$CORPUS")"
[ -s "$T/err" ] && head -5 "$T/err"
tally "corpus" < <(python3 - "$CORPUS" "$T/outcomes" <<'PY'
import collections, json, sys
want = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
by_style = collections.defaultdict(lambda: [0, 0])
for w, g in zip(want, got):
    by_style[w["style"]][w["osworld"] == g] += 1
    if w["osworld"] != g:
        print("FAIL %s string ends %s in the guest, %s in OSWorld: %r" % (w["style"], g, w["osworld"], w["code"][:120]))
for style, (bad, good) in sorted(by_style.items()):
    print("ok   %s: %d strings end as in OSWorld" % (style, good) if not bad else
          "FAIL %s: %d of %d strings differ" % (style, bad, bad + good))
PY
)
"$ENVMGR" down $E >/dev/null 2>&1
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish
