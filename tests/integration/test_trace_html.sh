#!/usr/bin/env bash
# The HTML export in a real browser: a trace with hostile strings is written
# by the recorder, exported, and loaded in headless Chromium. The page must
# load without a single console message (a CSP violation, a script error, a
# failed resource all show up there), contain every step, no <script>
# element, and only images that were exported next to it.
#
# Needs: chromium, gcc, build/libenvmgr.a (`make build/libenvmgr.a`).
# Prints a final line `N passed, N failed`; exits non-zero on any failure.
# ENVMGR_KEEP=1 keeps the work directory (trace, site/, shot.png) for a look.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
passed=0 failed=0
pass() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; [ $# -gt 1 ] && sed 's/^/    /' <<<"$2" | head -20; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; exit $?; }

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "skip: no chromium (apt-get install -y chromium)"
    finish
fi
if [ ! -f "$root/build/libenvmgr.a" ]; then
    make -C "$root" build/libenvmgr.a >/dev/null 2>&1 || { fail "build libenvmgr.a"; finish; }
fi

work=$(mktemp -d /tmp/envmgr-trace-html.XXXXXX)
if [ "${ENVMGR_KEEP:-0}" = 1 ]; then echo "keeping $work"; else trap 'rm -rf "$work"' EXIT; fi

# A driver that writes a trace through the real API and exports it.
cat >"$work/driver.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "envmgr/base/util.h"
#include "recorder/trace.h"

#define W 320
#define H 200

static void die(const char *what, em_err *err) { fprintf(stderr, "%s: %s\n", what, err->msg); exit(1); }

static void frame(trace_writer *w, int seed, char sha[65])
{
    em_err err = {0};
    uint8_t *px = xmalloc((size_t)W * H * 4);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = px + ((size_t)y * W + (size_t)x) * 4;
            p[0] = (uint8_t)(x + seed * 40), p[1] = (uint8_t)(y * 2), p[2] = (uint8_t)(seed * 90), p[3] = 0;
        }
    if (trace_add_frame_rgb(w, px, W, H, W * 4, sha, &err) < 0) die("frame", &err);
    free(px);
}

static void add(trace_writer *w, json_t *line)
{
    em_err err = {0};
    if (trace_append(w, line, &err) < 0) die("append", &err);
    json_decref(line);
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    em_err err = {0};
    trace_writer *w;
    json_t *h = json_pack("{s:s, s:s, s:s, s:{s:i, s:i}, s:s, s:b}", "task_id", "<script>alert('id')</script>",
                          "task_sha256", "1111111111111111111111111111111111111111111111111111111111111111",
                          "image_manifest_sha256", "2222222222222222222222222222222222222222222222222222222222222222",
                          "screen", "width", W, "height", H, "accel", "kvm", "unsafe_open_network", 0);
    if (trace_open(argv[1], h, &w, &err) < 0) die("open", &err);
    json_decref(h);
    add(w, json_pack("{s:s, s:{s:s}, s:f, s:b, s:s}", "type", "setup", "step", "type", "</pre><script>s()</script>",
                     "duration_ms", 12.0, "ok", 0, "error", "<img src=x onerror=alert(1)>"));
    const char *actions[] = {
        "{\"action_type\":\"MOVE_TO\",\"x\":20,\"y\":30}",
        "{\"action_type\":\"CLICK\",\"button\":\"left\",\"x\":160,\"y\":100,\"num_clicks\":2}",
        "{\"action_type\":\"DRAG_TO\",\"x\":300,\"y\":180}",
        "{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-3}",
        "{\"action_type\":\"RIGHT_CLICK\"}",
        "{\"action_type\":\"TYPING\",\"text\":\"</div><script>alert(\\\"typed\\\")</script>\\nline 2\"}",
        "{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"alt\",\"<t>\"]}",
        "{\"action_type\":\"WAIT\",\"seconds\":1.5}",
        "{\"action_type\":\"DONE\"}",
    };
    int n = (int)(sizeof actions / sizeof *actions);
    char before[65], after[65];
    frame(w, 0, before);
    for (int i = 0; i < n; i++) {
        frame(w, (i + 1) % 4, after); /* frames repeat: stored once */
        json_t *a = json_loads(actions[i], 0, NULL);
        if (!a) return 3;
        add(w, json_pack("{s:s, s:o, s:s, s:f, s:f, s:s, s:s}", "type", "step", "action", a, "source",
                         i % 2 ? "pyautogui" : "computer_13", "agent_ms", 900.0 + i, "action_ms", 30.0, "frame_before",
                         before, "frame_after", after));
        memcpy(before, after, sizeof before);
    }
    add(w, json_pack("{s:s, s:s}", "type", "egress", "url", "http://evil.example/<script>"));
    add(w, json_pack("{s:s, s:f, s:s, s:{}, s:s}", "type", "evaluation", "score", 1.0, "reason",
                     "</td></tr></table><script>r()</script>", "artifacts", "exit_cause", "done"));
    if (trace_close(w, &err) < 0) die("close", &err);
    if (trace_export_html(argv[1], argv[2], &err) < 0) die("export", &err);
    printf("%d\n", n);
    return 0;
}
EOF
cflags="$(pkg-config --cflags jansson libpng) $(libgcrypt-config --cflags 2>/dev/null)"
libs="$(pkg-config --libs jansson libpng) $(libgcrypt-config --libs 2>/dev/null || echo -lgcrypt) -lm -lpthread"
if out=$(gcc -std=c17 -D_GNU_SOURCE -I"$root" $cflags -o "$work/driver" "$work/driver.c" "$root/build/libenvmgr.a" $libs 2>&1); then
    pass "driver builds"
else
    fail "driver builds" "$out"; finish
fi
if steps=$("$work/driver" "$work/trace" "$work/site" 2>&1); then
    pass "trace written and exported ($steps steps)"
else
    fail "trace written and exported" "$steps"; finish
fi

# Headless Chromium, no network, a fresh profile. Console messages are logged
# to stderr as INFO:CONSOLE lines.
run_browser() { # page.html dom-out log-out
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$(mktemp -d "$work/profile.XXXXXX")" \
        --host-resolver-rules="MAP * ~NOTFOUND" --enable-logging=stderr --v=0 --virtual-time-budget=5000 \
        --dump-dom "file://$1" >"$2" 2>"$3"
}

# Control: the harness must see a CSP violation, or "no console messages" proves nothing.
cat >"$work/control.html" <<'EOF'
<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src 'self'; style-src 'unsafe-inline'"></head><body><script>console.log("ran")</script></body></html>
EOF
run_browser "$work/control.html" "$work/control.dom" "$work/control.log"
if grep -q "CONSOLE" "$work/control.log"; then
    pass "control: a blocked inline script shows up as a console message"
else
    fail "control: a blocked inline script shows up as a console message" "$(tail -5 "$work/control.log")"
fi

page="$work/site/index.html"
if run_browser "$page" "$work/dom.html" "$work/browser.log" && [ -s "$work/dom.html" ]; then
    pass "chromium loads index.html"
else
    fail "chromium loads index.html" "$(tail -5 "$work/browser.log")"; finish
fi
if console=$(grep "CONSOLE" "$work/browser.log"); then
    fail "no console messages (CSP, script or resource errors)" "$console"
else
    pass "no console messages (CSP, script or resource errors)"
fi
count=$(grep -o '<article class="step" id="step-[0-9]*"' "$work/dom.html" | wc -l)
if [ "$count" = "$steps" ]; then pass "every step in the DOM ($count)"; else fail "every step in the DOM: $count of $steps"; fi
if grep -qi '<script' "$work/dom.html"; then
    fail "no <script> element in the DOM" "$(grep -oi '.\{40\}<script.\{40\}' "$work/dom.html" | head -3)"
else
    pass "no <script> element in the DOM"
fi
if grep -q '&lt;script&gt;alert(' "$work/dom.html" && grep -q 'onerror=alert(1)&gt;' "$work/dom.html"; then
    pass "hostile strings shown as text"
else
    fail "hostile strings shown as text"
fi
missing=0 total=0
for src in $(grep -o 'src="[^"]*"' "$work/dom.html" | sed 's/^src="//; s/"$//' | sort -u); do
    total=$((total + 1))
    case "$src" in
    frames/[0-9a-f]*.png) [ -f "$work/site/$src" ] || missing=$((missing + 1)) ;;
    *) missing=$((missing + 1)); echo "    unexpected src: $src" ;;
    esac
done
if [ "$total" -gt 0 ] && [ "$missing" = 0 ]; then
    pass "every image is a local exported frame ($total distinct)"
else
    fail "every image is a local exported frame ($missing of $total bad)"
fi
if grep -q '<circle cx="160.0" cy="100.0"' "$work/dom.html" && grep -q '<line x1="160.0" y1="100.0" x2="300.0" y2="180.0"' "$work/dom.html"; then
    pass "click and drag drawn on the frames"
else
    fail "click and drag drawn on the frames"
fi
if run_browser_shot=$(timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$(mktemp -d "$work/profile.XXXXXX")" --window-size=1200,900 \
        --screenshot="$work/shot.png" "file://$page" 2>&1) && [ -s "$work/shot.png" ]; then
    pass "page renders to a screenshot"
else
    fail "page renders to a screenshot" "$run_browser_shot"
fi
finish
