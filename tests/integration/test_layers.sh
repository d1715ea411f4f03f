#!/usr/bin/env bash
# make layers: passes on the tree, and fails, naming file and include, on planted upward and
# sideways includes in a copy of it.
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$T # lib.sh's folder, removed by its cleanup (a trap of this file's own replaced that one and left $T behind)

if out=$("$root/scripts/check-layers" "$root"); then ok "the tree keeps the layer order ($(echo "$out" | tail -1))"
else bad "the tree breaks the layer order: $out"; fi

plant() { # plant FILE INCLUDE -> output of the check on a copy with the include added
    rm -rf "$tmp/t" && mkdir -p "$tmp/t"
    cp -r "$root/envmgr" "$root/recorder" "$root/evaluator" "$tmp/t/"
    printf '#include "%s"\n' "$2" >> "$tmp/t/$1"
    "$root/scripts/check-layers" "$tmp/t"
}
out=$(plant envmgr/base/util.c envmgr/vm/vm.h); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q 'envmgr/base/util.c:[0-9]*: #include "envmgr/vm/vm.h": upward'; then
    ok "an upward include (base -> vm) fails, naming the file and the include"
else bad "upward include not caught (rc $rc): $out"; fi
out=$(plant envmgr/action/actions.c envmgr/net/netpolicy.h); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q 'envmgr/action/actions.c:[0-9]*: #include "envmgr/net/netpolicy.h": sideways'; then
    ok "a sideways include (action -> net, one layer) fails"
else bad "sideways include not caught (rc $rc): $out"; fi
out=$(plant envmgr/task/task.c envmgr/episode/episode.h); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q 'upward, envmgr/task/ (layer 4) may not include envmgr/episode/'; then
    ok "the task format including episode (a circle in the making) fails"
else bad "task -> episode not caught (rc $rc): $out"; fi
# caught FILE INCLUDE MESSAGE LABEL: the include planted in FILE fails the check with MESSAGE
caught() {
    out=$(plant "$1" "$2"); rc=$?
    if [ $rc -ne 0 ] && echo "$out" | grep -q "$1:[0-9]*: #include \"$2\": $3"; then ok "$4"
    else bad "$4: not caught (rc $rc): $out"; fi
}
# The env seam: episode/, api/, suite/ and cli/ reach QEMU only through env/, though vm/ is a lower layer.
for seam in "envmgr/episode/episode_env.c envmgr/vm/vm.h" "envmgr/api/api_live.c envmgr/vm/vm.h" \
            "envmgr/suite/suite_pool.c envmgr/vm/manifest.h" "envmgr/cli/cmd_up.c envmgr/vm/vnc.h"; do
    set -- $seam
    caught "$1" "$2" "${1%/*}/ reaches QEMU and the guest only through envmgr/env/" "the env seam: $1 including $2 fails"
done
# Leaf libraries: evaluator/ and recorder/ include nothing above envmgr/base, not even a lower
# layer's neighbour (net is layer 3, but evaluator reaches the asset cache through env_ops.h).
for leaf in "evaluator/getters.c envmgr/net/assets.h" "evaluator/score.c envmgr/vm/vm.h" \
            "recorder/trace_writer.c envmgr/action/actions.h"; do
    set -- $leaf
    caught "$1" "$2" "${1%%/*}/ is a leaf library" "a leaf library including $2 fails ($1)"
done
out=$(plant envmgr/cli/main.c envmgr/base/nonexistent.h); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q 'no such project header'; then ok "an include of a missing header fails"
else bad "missing header not caught: $out"; fi
rm -rf "$tmp/t" && mkdir -p "$tmp/t" && cp -r "$root/envmgr" "$root/recorder" "$root/evaluator" "$tmp/t/"
mkdir -p "$tmp/t/envmgr/newfolder"
out=$("$root/scripts/check-layers" "$tmp/t"); rc=$?
if [ $rc -ne 0 ] && echo "$out" | grep -q 'envmgr/newfolder/: folder has no layer'; then ok "a folder without a layer fails"
else bad "folder without a layer not caught: $out"; fi
finish
