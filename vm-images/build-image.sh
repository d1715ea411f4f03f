#!/bin/bash
# Build a guest image, or reuse a cached build, and point out/NAME at it.
#
#   build-image.sh NAME          build/reuse image NAME (a directory here)
#   build-image.sh --key NAME    print the input key and exit
#   build-image.sh --prune NAME  delete cached builds of NAME with another key
#
# Input key = sha256 over: a format version, the host mirror URLs, and the
# path and contents of every recipe file (this script, lib/, toolbelt/, NAME/
# and every layer NAME/image.conf lists in LAYERS, with their packages.list).
# A complete build lives in
#     ${ENVMGR_IMAGE_CACHE:-/var/cache/envmgr/images}/NAME-<key[0:16]>/
# and is complete exactly when its manifest.json exists: the recipe writes
# the manifest last (atomically), and the directory itself only appears by
# renaming a finished temp dir.  So when inputs are unchanged this script only
# (re)creates the symlink out/NAME -> cache dir; a fresh clone on the same
# machine (CI) reuses the image at once.  Builds of the same key are
# serialised with a lock; a build interrupted even by SIGKILL leaves only a
# .NAME-<key>.tmp.* directory, removed by the next build of that key.
set -euo pipefail
umask 022

FORMAT=1        # bump when the meaning of the outputs changes
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"

usage() { die "usage: build-image.sh [--key|--prune] NAME"; }
MODE=build
case ${1:-} in
    --key) MODE=key; shift ;;
    --prune) MODE=prune; shift ;;
    -*) usage ;;
esac
[ $# -eq 1 ] || usage
NAME=$1
if ! [[ $NAME =~ ^[a-z0-9][a-z0-9-]*$ ]] || [ ! -f "$HERE/$NAME/build.sh" ]; then
    die "no image recipe '$NAME' in $HERE"
fi

CACHE=$(realpath -m -- "${ENVMGR_IMAGE_CACHE:-/var/cache/envmgr/images}")
# shellcheck source-path=SCRIPTDIR source=desktop/image.conf
. "$HERE/$NAME/image.conf"
for layer in ${LAYERS:-}; do
    [[ $layer =~ ^[a-z0-9][a-z0-9-]*$ ]] && [ -d "$HERE/$layer" ] ||
        die "$NAME/image.conf: LAYERS: no recipe directory '$layer'"
done

# The mirror the host's apt uses, unless ENVMGR_MIRROR (and
# ENVMGR_SECURITY_MIRROR, empty for none) override it.
if [ -n "${ENVMGR_MIRROR:-}" ]; then
    MIRROR=$ENVMGR_MIRROR
    SECURITY_MIRROR=${ENVMGR_SECURITY_MIRROR:-}
else
    mirrors=$(python3 "$HERE/lib/host-mirror.py" "$SUITE") ||
        die "cannot determine the host's Debian mirror (set ENVMGR_MIRROR)"
    MIRROR=$(sed -n 1p <<<"$mirrors")
    SECURITY_MIRROR=${ENVMGR_SECURITY_MIRROR-$(sed -n 2p <<<"$mirrors")}
fi

input_key() {
    {
        printf 'envmgr-image-format %s\nname %s\nmirror %s\nsecurity-mirror %s\n' \
            "$FORMAT" "$NAME" "$MIRROR" "$SECURITY_MIRROR"
        # sha256sum prints "hash  path": paths count too (a renamed file
        # lands elsewhere in the guest).  Sorted for a stable order.
        # shellcheck disable=SC2046  # layer names are [a-z0-9-]
        (cd "$HERE" && find build-image.sh lib toolbelt $(printf '%s\n' "$NAME" ${LAYERS:-} | sort -u) \
            \( -name __pycache__ -o -name '*.pyc' -o -name '*~' -o -name '.*.swp' \) -prune \
            -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    } | sha256sum | cut -d' ' -f1
}
KEY=$(input_key)
[[ $KEY =~ ^[0-9a-f]{64}$ ]] || die "could not compute the input key"
ID=$NAME-${KEY:0:16}
FINAL=$CACHE/$ID
LINK=$HERE/out/$NAME

complete() { [ -f "$1/manifest.json" ]; }

# Point out/NAME at the cache dir, atomically (rename over the old link), and
# only if it does not already point there.
link_output() {
    local tmp
    [ "$(readlink "$LINK" 2>/dev/null)" = "$FINAL" ] && return 0
    if [ -e "$LINK" ] && [ ! -L "$LINK" ]; then
        die "$LINK exists and is not a symlink; remove it ('make clean')"
    fi
    mkdir -p "$(dirname "$LINK")"
    tmp=$(dirname "$LINK")/.$NAME.link.$$
    ln -sfn "$FINAL" "$tmp"
    mv -fT "$tmp" "$LINK"
    log "$LINK -> $FINAL"
}

case $MODE in
key)
    echo "$KEY"
    exit 0 ;;
prune)
    shopt -s nullglob
    for d in "$CACHE/$NAME"-????????????????; do
        [ "$d" = "$FINAL" ] && continue
        log "removing stale cache entry $d"
        remove_tree "$d"
    done
    for f in "$CACHE/.$NAME"-????????????????.lock; do
        [ "$f" = "$CACHE/.$ID.lock" ] || rm -f "$f"
    done
    exit 0 ;;
esac

if complete "$FINAL"; then
    log "image $NAME is up to date ($FINAL)"
    link_output
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "image $NAME ($ID) is not in $CACHE; building it needs root"
mkdir -p "$CACHE"
exec 9>"$CACHE/.$ID.lock"
if ! flock -n 9; then
    log "another build of $ID is running; waiting for it"
    flock 9
fi
if complete "$FINAL"; then          # the other build finished it
    link_output
    exit 0
fi

# Leftovers of an interrupted build of this key: nobody else can be using
# them while we hold the lock.  (A complete dir would have matched above.)
shopt -s nullglob
for d in "$CACHE/.$ID.tmp."* "$FINAL"; do
    [ -e "$d" ] || continue
    log "removing leftovers of an interrupted build: $d"
    remove_tree "$d" || die "cannot remove $d"
done
shopt -u nullglob

TMP=$(mktemp -d "$CACHE/.$ID.tmp.XXXXXX")
cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    remove_tree "$TMP" || rc=1
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

log "building image $NAME ($ID) from $MIRROR"
T0=$(date +%s)
# 9>&-: only this process holds the lock, not whatever the recipe starts.
MIRROR=$MIRROR SECURITY_MIRROR=$SECURITY_MIRROR INPUT_KEY=$KEY \
    "$HERE/$NAME/build.sh" "$TMP/out" "$TMP/work" 9>&-
complete "$TMP/out" || die "the $NAME recipe finished without a manifest"
[ ! -e "$TMP/work" ] || remove_tree "$TMP/work"
chmod 0755 "$TMP/out"
mv -T "$TMP/out" "$FINAL"
log "image $NAME built in $(($(date +%s) - T0)) s: $FINAL"
link_output
