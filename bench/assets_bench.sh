#!/usr/bin/env bash
# Task assets (docs/osworld.md): fetch throughput from a local HTTP server into the host's asset
# cache (`envmgr task fetch`, 1 and 4 at a time), and the cost of uploading a cached asset into a
# guest through the guest agent, per MiB (from the `upload_ms` a download step records in the trace).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
envmgr=$root/bin/envmgr
T=$(mktemp -d /tmp/envmgr-assets-bench.XXXXXX)
export ENVMGR_ASSET_CACHE=$T/cache NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
export ENVMGR_RUN_DIR=${ENVMGR_RUN_DIR:-$T/run}
srv=
finish() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; "$envmgr" down bench-assets >/dev/null 2>&1; rm -rf "$T"; }
trap finish EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
mkdir -p "$T/www" "$T/one" "$T/four" "$T/up"
for i in 1 2 3 4; do head -c $((32 << 20)) /dev/urandom >"$T/www/f$i.bin"; done
head -c $((8 << 20)) /dev/urandom >"$T/www/u8.bin"
head -c $((32 << 20)) /dev/urandom >"$T/www/u32.bin"
python3 "$root/tests/data/osworld/serve.py" "$T/www" "$T/port" >/dev/null 2>&1 &
srv=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
base=http://127.0.0.1:$(cat "$T/port")
export ENVMGR_ASSET_ALLOW_PRIVATE=127.0.0.1:$(cat "$T/port")   # the operator's: a task could not
task() { # task FILE ID URL:PATH...
    local f=$1 id=$2; shift 2
    python3 - "$f" "$id" "$base" "$@" <<'PY'
import json, sys
f, tid, base = sys.argv[1:4]
files = [{"url": base + "/" + a.split(":")[0], "path": a.split(":")[1]} for a in sys.argv[4:]]
json.dump({"id": tid, "instruction": "bench", "config": [{"type": "download", "parameters": {"files": files}}],
           "evaluator": {"func": "infeasible"}, "limits": {"max_steps": 1}}, open(f, "w"))
PY
}
task "$T/one/t.json" one f1.bin:/tmp/f1
task "$T/four/t.json" four f1.bin:/tmp/1 f2.bin:/tmp/2 f3.bin:/tmp/3 f4.bin:/tmp/4
rate() { sed -nE 's/.*fetched \(([0-9.]+) MiB in ([0-9.]+) s\).*/\1 \2/p' | awk '{ printf "%.0f MiB/s (%s MiB in %s s)", ($2 > 0 ? $1 / $2 : 0), $1, $2 }'; }
echo "assets: fetch 1 x 32 MiB, 1 at a time: $("$envmgr" task fetch --parallel 1 "$T/one" 2>/dev/null | rate)"
rm -rf "$T/cache"
echo "assets: fetch 4 x 32 MiB, 4 at a time: $("$envmgr" task fetch --parallel 4 "$T/four" 2>/dev/null | rate)"
t0=$(date +%s%N)
"$envmgr" task fetch --offline "$T/four" >/dev/null 2>&1
echo "assets: verify 4 x 32 MiB already cached (sha256 of each): $(( ($(date +%s%N) - t0) / 1000000 )) ms"

# Upload from the cache into a guest: two sizes, so the fixed cost and the cost per MiB separate.
task "$T/up/t.json" upload u8.bin:/tmp/u8.bin u32.bin:/tmp/u32.bin
"$envmgr" task fetch "$T/up" >/dev/null 2>&1
"$envmgr" up --name bench-assets --accel tcg >/dev/null || { echo "assets: upload: the env did not start"; exit 0; }
"$envmgr" run "$T/up/t.json" --env bench-assets --agent "$root/tests/data/agents/scripted-fallback --tasks $T/up/t.json" --out "$T/out" \
    --offline >/dev/null 2>&1
python3 - "$T/out/trace/trace.jsonl" <<'PY'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"setup"' in l][0]
ms = {f["path"]: f["upload_ms"] for f in s["detail"]["files"]}
a, b = ms["/tmp/u8.bin"], ms["/tmp/u32.bin"]
per = (b - a) / 24
print(f"assets: upload a cached asset into the guest (TCG, guest agent): 8 MiB {a:.0f} ms, 32 MiB {b:.0f} ms; "
      f"{per:.0f} ms per MiB ({1000 / per if per > 0 else 0:.1f} MiB/s), fixed cost {max(a - 8 * per, 0):.0f} ms")
PY
