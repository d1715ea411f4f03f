#!/usr/bin/env bash
# make bench: figures, not pass/fail. Each line names KVM or TCG.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
echo "envmgr benchmark on $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u +%F)"
export ENVMGR_RUN_DIR=${ENVMGR_RUN_DIR:-$(mktemp -d /tmp/envmgr-bench.XXXXXX)}
trap 'rm -rf "$ENVMGR_RUN_DIR"' EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
"$root/build/bench/envbench" ${ENVMGR_BENCH_ARGS:---cold}
"$root/bench/reset_load_bench.sh" || echo "reset_load_bench: failed (see above)"
"$root/bench/boundary_bench.sh" || echo "boundary_bench: failed (see above)"
[ -d "$root/tasks/demo" ] && "$root/bench/replay_bench.sh"
"$root/bench/step_bench.sh" || echo "step_bench: failed (see above)"
"$root/build/bench/api_bench" ${ENVMGR_API_BENCH_ARGS:-} || echo "api_bench: the soak saw errors or leaked envs (see above)"
"$root/bench/suite_bench.sh" || echo "suite_bench: a suite run failed (see above)"
"$root/build/bench/sandbox_bench" ${ENVMGR_SANDBOX_BENCH_ARGS:-} || echo "sandbox_bench: the evaluator sandbox did not run (see above)"
"$root/bench/assets_bench.sh" || echo "assets_bench: failed (see above)"
"$root/bench/state_bench.sh" || echo "state_bench: failed (see above)"
"$root/bench/import_bench.sh" || echo "import_bench: failed (see above)"
[ "${ENVMGR_BENCH_REFLINK:-}" != 1 ] || "$root/bench/state_disk_bench.sh" --runs 3 --envs 2 || echo "state_disk_bench: failed (see above)"
"$root/bench/setup_cache_bench.sh" || echo "setup_cache_bench: failed (see above)"
"$root/bench/rl_bench.sh" || echo "rl_bench: failed (see above)"
"$root/bench/apps_bench.sh" || echo "apps_bench: failed (see above)"
