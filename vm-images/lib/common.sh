# Shared shell helpers for the image recipes.  Sourced, never executed.
# shellcheck shell=bash

# Messages go to a copy of the stderr the script started with.  A shell
# function's redirections (`func >file`) are made in this shell, so a signal
# trap firing inside one would otherwise write "build failed" into that file,
# e.g. into a log that the cleanup deletes.
exec {LOG_FD}>&2
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&"$LOG_FD"; }
die() { log "error: $*"; exit 1; }

# Run "$@" with stdout/stderr appended to the log file $1.  On failure show the
# log's tail: the work directory (and the log in it) is deleted on exit.
run_logged() {
    local logf=$1; shift
    if ! "$@" >>"$logf" 2>&1; then
        log "command failed: $*"
        tail -n 40 "$logf" | sed 's/^/  | /' >&"$LOG_FD"
        return 1
    fi
}

# Mount points at or below directory $1, deepest first (children sort after
# their parents, so a reverse sort unmounts /x/dev/pts before /x/dev).
# mountinfo escapes blanks as \040 etc.; printf %b turns them back.
mounts_under() {
    local base m
    base=$(realpath -m -- "$1")
    while read -r _ _ _ _ m _; do
        m=$(printf '%b' "$m")
        if [ "$m" = "$base" ] || [ "${m#"$base"/}" != "$m" ]; then
            printf '%s\n' "$m"
        fi
    done </proc/self/mountinfo | LC_ALL=C sort -r
}

# Unmount everything at or below $1.  Returns non-zero if something stays.
unmount_under() {
    local m
    while IFS= read -r m; do
        [ -n "$m" ] || continue
        umount -- "$m" 2>/dev/null || umount -l -- "$m" 2>/dev/null || true
    done < <(mounts_under "$1")
    [ -z "$(mounts_under "$1")" ]
}

# Kill processes running chrooted below directory $1 (a daemon that a
# package's maintainer script started, or what an interrupted build left).
kill_chrooted() {
    local base p r pids=()
    base=$(realpath -m -- "$1")
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        if [ "$r" = "$base" ] || [ "${r#"$base"/}" != "$r" ]; then
            pids+=("${p#/proc/}")
        fi
    done
    [ ${#pids[@]} -gt 0 ] || return 0
    log "stopping processes still running in $base: ${pids[*]}"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    sleep 2
    kill -KILL "${pids[@]}" 2>/dev/null || true
}

# rm -rf a directory this build created.  Unmounts first and refuses to
# delete anything while a mount (a chroot's /proc, /sys, /dev/pts) remains
# below it, so a cleanup can never recurse into the host's file systems.
remove_tree() {
    local d=$1
    [ -e "$d" ] || [ -L "$d" ] || return 0
    kill_chrooted "$d"
    if ! unmount_under "$d"; then
        log "warning: mounts remain below $d; left in place"
        return 1
    fi
    rm -rf --one-file-system -- "$d"
}
