#!/usr/bin/env bash
# The apps tasks (tasks/apps: OSWorld-shaped, two or more per application) on the apps image under TCG,
# one env (the image is 3 GiB): every scripted solution scores 1.0, the null agent (DONE at once) 0.0,
# and every trace verifies. SKIPPED unless ENVMGR_APPS=1 (`make test-apps`): with the image and golden
# state cached it takes about 2 minutes a task per agent; the image build and cold boot add 10-15.
# Prints `apps-tasks: N passed, N failed`.
SUITE=apps-tasks
source "$(dirname "$0")/lib.sh"
if [ "${ENVMGR_APPS:-0}" != 1 ]; then
    echo "apps-tasks: skipped (set ENVMGR_APPS=1, or make test-apps)"
    finish
    exit 0
fi
SUITE_DIR=$ROOT/tasks/apps
AG=$ROOT/tasks/agents
ONLY=${ENVMGR_APPS_TASKS:-}           # a subset: "calc-add-row vlc-pause"
pick=$SUITE_DIR
if [ -n "$ONLY" ]; then
    pick=$T/pick; mkdir -p "$pick"; cp -r "$SUITE_DIR/files" "$pick/files"  # a copy: task files may not resolve outside their folder
    for id in $ONLY; do cp "$SUITE_DIR/$id.json" "$pick/"; done
fi
check "every apps task loads" "$ENVMGR" task check "$pick"
for a in scripted null; do
    args=$a; [ "$a" = scripted ] && args="scripted --tasks $pick"
    "$ENVMGR" suite run "$pick" --agent "$AG/$args" --envs 1 --accel tcg --out "$T/$a" --progress plain \
        >"$T/$a.log" 2>&1 || echo "suite run with $a exited $?"
    tail -4 "$T/$a.log"
done
for task in "$pick"/*.json; do
    id=$(basename "$task" .json)
    check "$id: the scripted solution scores 1.0" test "$(score_of "$T/scripted" "$id")" = 1.0
    check "$id: the null agent scores 0.0" test "$(score_of "$T/null" "$id")" = 0.0
    check "$id: its trace verifies" "$ENVMGR" trace verify "$T/scripted/traces/$id/trace" >/dev/null
done
finish
