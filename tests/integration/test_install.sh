#!/usr/bin/env bash
# make install into a temporary prefix, as a new user would: the installed envmgr runs and finds its
# data files and images under the prefix (nothing of the checkout is compiled in), its man pages
# open with man, the bash completion completes, the Python client installs into a fresh venv
# (pip and python3 -m build, no network) and its example plays an episode against the installed
# `envmgr serve`; make uninstall then leaves nothing. Prints `install: N passed, N failed`.
SUITE=install
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1
PY=/usr/bin/python3 # Debian's: python3-venv and python3-build are installed for it
P=$T/prefix
VERSION=$(cat "$ROOT/VERSION")

SERVE_PID=
stop_server() { # 0 when the server exited 0 within 60 s of SIGTERM
    local rc=0
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVE_PID" 2>/dev/null; then kill -9 "$SERVE_PID"; rc=1; fi
    wait "$SERVE_PID" 2>/dev/null || rc=1
    SERVE_PID=
    return $rc
}
trap 'stop_server; cleanup' EXIT

# --- install ----------------------------------------------------------------------------
check "make install PREFIX=<temp> succeeds" make -C "$ROOT" --no-print-directory -s install PREFIX="$P"
E=$P/bin/envmgr
check "the binary is installed" test -x "$E"
check "evaluator scripts are in share/envmgr" test -x "$P/share/envmgr/evaluator/scripts/file_contains.py"
check "evaluator metric families are in share/envmgr" test -f "$P/share/envmgr/evaluator/metrics/run.py"
check "image recipes are in share/envmgr" test -x "$P/share/envmgr/vm-images/build-image.sh"
check "docs are in share/doc/envmgr" test -f "$P/share/doc/envmgr/docs/http-api.md"
check "the installed recipes have the checkout's image key (a rebuild reuses the cache)" \
    test "$("$P/share/envmgr/vm-images/build-image.sh" --key desktop 2>/dev/null)" = "$(cd "$ROOT/vm-images" && ./build-image.sh --key desktop 2>/dev/null)"

# --- the installed envmgr -------------------------------------------------------------------
check "envmgr --help runs and lists the commands" bash -c "'$E' --help | grep -q '^  suite '"
check "envmgr --version is VERSION" test "$("$E" --version)" = "envmgr $VERSION"
check "the checkout's path is not compiled into envmgr (debug info aside)" \
    bash -c "strip -o '$T/stripped' '$E' && ! grep -aqF '$ROOT' '$T/stripped'"
"$E" doctor >"$T/doctor" 2>&1
check "envmgr doctor finds its data under the prefix" grep -qF "data: $P/share/envmgr" "$T/doctor"
grep -i image "$T/doctor" | sed 's/^/     /'
check "envmgr doctor finds the built image under the prefix" grep -qE "^ok +image desktop .*$P/share/envmgr/vm-images/out/desktop" "$T/doctor"
check "envmgr doctor says the host is ready" grep -q '^doctor: ready to run envs' "$T/doctor"
check "ENVMGR_DATA_DIR moves the data directory" \
    bash -c "ENVMGR_DATA_DIR=/nonexistent '$E' doctor | grep -q '^MISSING data: '"
check "the installed envmgr boots an env from the installed image" "$E" up --name inst1 --accel tcg
check "... and takes a screenshot of it" bash -c "'$E' screenshot inst1 '$T/inst1.png' && '$PNGTOOL' info '$T/inst1.png' >/dev/null"
"$E" down inst1 >/dev/null 2>&1

# --- man pages ----------------------------------------------------------------------------------
pages=0
for c in $("$E" --help | sed -n '/^commands:/,/^$/s/^  \([a-z][a-z-]*\).*/\1/p'); do
    if [ -f "$P/share/man/man1/envmgr-$c.1" ]; then pages=$((pages + 1)); else bad "no man page for envmgr $c"; fi
done
check "a man page per command ($pages)" test "$pages" -ge 15
check "man -l envmgr.1 renders the command list" bash -c "MANWIDTH=100 man -l '$P/share/man/man1/envmgr.1' 2>/dev/null | grep -q 'check the host'"
check "man -l envmgr-suite.1 has the synopsis from --help" \
    bash -c "MANWIDTH=100 man -l '$P/share/man/man1/envmgr-suite.1' 2>/dev/null | grep -A2 '^SYNOPSIS' | grep -q 'envmgr suite run SUITE --agent CMD'"
check "man finds the pages through MANPATH" bash -c "MANPATH='$P/share/man' man -w envmgr-serve | grep -qF '$P/share/man/man1/envmgr-serve.1'"

# --- bash completion --------------------------------------------------------------------------
# complete WORDS...: what _envmgr offers for the last word, with the installed envmgr on PATH
complete_words() {
    PATH="$P/bin:$PATH" bash -c 'source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(($# - 1)); _envmgr; echo "${COMPREPLY[*]}"' \
        "$P/share/bash-completion/completions/envmgr" "$@"
}
check "envmgr su<TAB> completes to suite" test "$(complete_words envmgr su)" = suite
check "envmgr suite <TAB> offers its subcommands" test "$(complete_words envmgr suite '')" = "run compare merge list summary export audit"
check "envmgr serve --max-en<TAB> completes the option" test "$(complete_words envmgr serve --max-en)" = --max-envs
# (every installed image: a checkout with the apps image built offers `apps desktop`)
check "envmgr up --image <TAB> offers the installed image" bash -c '[[ " $1 " == *" desktop "* ]]' _ "$(complete_words envmgr up --image '')"
if [ -f /usr/share/bash-completion/bash_completion ]; then
    check "bash-completion loads it from PREFIX/share (XDG_DATA_DIRS)" \
        bash -c "source /usr/share/bash-completion/bash_completion; XDG_DATA_DIRS='$P/share' __load_completion envmgr && complete -p envmgr | grep -q _envmgr"
fi

# --- the Python client in a fresh venv ----------------------------------------------------------
before=$(cd "$ROOT" && git status --porcelain --ignored clients/python)
check "a fresh venv" "$PY" -m venv "$T/venv"
check "pip install ./clients/python (no network, no setuptools)" \
    bash -c "cd '$ROOT' && '$T/venv/bin/pip' install --no-cache-dir --no-index -q ./clients/python"
check "the client's version is envmgr's" test "$("$T/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("envmgr-client"))')" = "$VERSION"
check "the venv imports the installed client, not the checkout's" \
    bash -c "cd '$T' && '$T/venv/bin/python' -c 'import envmgr_client; print(envmgr_client.__file__)' | grep -qF '$T/venv/'"
check "python3 -m build makes a wheel and an sdist" \
    bash -c "'$PY' -m build --no-isolation -o '$T/dist' '$ROOT/clients/python' >/dev/null 2>&1 && ls '$T/dist/envmgr_client-$VERSION-py3-none-any.whl' '$T/dist/envmgr_client-$VERSION.tar.gz' >/dev/null"
check "the wheel installs into another venv" \
    bash -c "'$PY' -m venv '$T/venv2' && '$T/venv2/bin/pip' install --no-index -q '$T/dist/envmgr_client-$VERSION-py3-none-any.whl' && '$T/venv2/bin/python' -c 'import envmgr_client, envmgr_osworld_agent'"
check "building left nothing in the checkout" test "$(cd "$ROOT" && git status --porcelain --ignored clients/python)" = "$before"

# --- the example against the installed envmgr serve ----------------------------------------
mkdir -p "$T/example" && cp "$ROOT/clients/python/examples/agent_loop.py" "$T/example/"
(cd "$T" && exec "$E" serve --listen 127.0.0.1:0 --token-file "$T/token" --task-root "$ROOT/tasks" \
    --out "$T/serve-out" --accel tcg >"$T/serve.out" 2>"$T/serve.err") &
SERVE_PID=$!
wait_until 20 grep -q 'token file' "$T/serve.out"
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
check "the installed envmgr serve listens ($URL)" bash -c "[[ '$URL' == http://127.0.0.1:* ]]"
"$T/venv/bin/python" "$T/example/agent_loop.py" "$URL" "$ROOT/tasks/demo/infeasible-ms-word.json" \
    --token-file "$T/token" >"$T/example.out" 2>&1
check "the example plays an episode with the installed client and scores it 1.00" grep -q '^result: 1.00' "$T/example.out"
check "the server stops cleanly" stop_server
check "the server tore its env down" test -z "$(find "$ENVMGR_RUN_DIR" -mindepth 1 -maxdepth 1 -type d 2>/dev/null)"

# --- uninstall -------------------------------------------------------------------------------------
check "make uninstall succeeds" make -C "$ROOT" --no-print-directory -s uninstall PREFIX="$P"
check "uninstall leaves nothing (the prefix it created is gone)" test ! -e "$P"
mkdir -p "$T/prefix2/share/man/man1"
make -C "$ROOT" --no-print-directory -s install PREFIX="$T/prefix2" >/dev/null &&
    make -C "$ROOT" --no-print-directory -s uninstall PREFIX="$T/prefix2" >/dev/null
check "uninstall keeps directories that were there before" \
    test "$(cd "$T/prefix2" && find . | sort | tr '\n' ' ')" = ". ./share ./share/man ./share/man/man1 "
[ -s "$T/example.out" ] && [ "$FAIL" != 0 ] && { echo "--- example output:"; cat "$T/example.out"; cat "$T/serve.err"; }
finish
