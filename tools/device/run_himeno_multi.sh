#!/usr/bin/env bash
# Himeno across GPUs on the GPU machine (issue 11): build the Himeno targets, run the
# Himeno GPU tests, then himeno_bench --ranks over every mode and size XS..XL, with and without
# communication. At most six files under $OUT:
#   summary.txt  devices, each step's exit status and time, test verdicts, the tables
#   build.log    configure and build
#   tests.log    himeno_multi_gpu_test, himeno_gpu_test, himeno_multi_host_test
#   bench.json   the benchmark's --json output, every run (a metadata object opens each run)
#   bench.txt    the same rows as tables
#   speedup.png  speedup over the one-GPU run against size, per mode (plot_multi.py)
# Runs: on two GPUs or more, --ranks 2 (one rank per GPU, the issue's targets) and --ranks 2 over
# ib for the small sizes; on one GPU, --ranks 1 (each mode's own cost with no peer) and --ranks 2
# with both ranks on GPU 0 for XS..M (a real peer, no speedup possible). Every step has its own
# time limit, cut to what is left before GV_DEADLINE seconds (default 470); a step with less
# than 10 s left is skipped, so the script ends within about 8 minutes.
# GV_SKIP_TESTS=1: benchmarks only. GV_BENCH_ARGS: more himeno_bench arguments for every run.
# GV_BUILD_DIR (default build-himeno-multi) is the build tree; GV_PREBUILT=1 when it came built
# (tools/device/carry_build.sh).
set -uo pipefail
OUT=${OUT:-/tmp/gv-himeno-multi}
DEADLINE=${GV_DEADLINE:-470}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,power.draw --format=csv | tee -a "$S"
nvidia-smi topo -m 2>/dev/null | head -6 | tee -a "$S"
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
B=${GV_BUILD_DIR:-build-himeno-multi}
if [[ -z ${GV_PREBUILT:-} ]]; then
  log "build"
  echo "configure $(limited 90 "$OUT/build.log" cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90)" | tee -a "$S"
  echo "build $(limited 300 "$OUT/build.log" cmake --build $B -j16 --target himeno_bench himeno_multi_gpu_test himeno_gpu_test himeno_multi_host_test)" | tee -a "$S"
fi
[[ -x $B/bench/himeno/himeno_bench ]] || { grep -sE "error" "$OUT/build.log" | head -30 | tee -a "$S"; exit 1; }

if [[ -z "${GV_SKIP_TESTS:-}" ]]; then
  : > "$OUT/tests.log"
  for step in himeno_multi_gpu_test:200 himeno_gpu_test:90 himeno_multi_host_test:60; do
    t=${step%%:*}
    log "$t"
    echo "## $t" >> "$OUT/tests.log"
    echo "$t $(limited "${step##*:}" "$OUT/tests.log" "$B/tests/himeno/$t")" | tee -a "$S"
  done
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|Failure|Expected|Which is|failed in mode" "$OUT/tests.log" | head -60 | tee -a "$S"
fi

J="$OUT/bench.json"
bench() {  # bench LIMIT ARGS...: one himeno_bench --json run into bench.json
  local limit=$1; shift
  log "himeno_bench $* ${GV_BENCH_ARGS:-}"
  # shellcheck disable=SC2086  # GV_BENCH_ARGS splits into arguments
  echo "himeno_bench $(limited "$limit" "$J" $B/bench/himeno/himeno_bench --json "$@" ${GV_BENCH_ARGS:-})" | tee -a "$S"
}
if (( GPUS >= 2 )); then
  bench 200 --ranks 2 --mode all --size all
  bench 80 --ranks 2 --transport ib --mode stream,in-kernel,persistent,graph --size XS,S,M --comm-only
  bench 100 --ranks 1 --mode all --size XS,S,M
else
  bench 150 --ranks 1 --mode all --size all
  bench 120 --ranks 2 --mode all --size XS,S,M
fi

python3 - "$J" > "$OUT/bench.txt" <<'PY'
import json, sys
head = "%-5s %-14s %5s %4s %6s %10s %10s %10s %9s %8s %6s %10s %12s %9s" % (
    "size", "mode", "ranks", "gpus", "iters", "t_iter_us", "nocomm_us", "overhead", "GFLOPS", "speedup", "eff",
    "cpu_us/it", "energy_mJ/it", "gosa_diff")
def f(v, fmt):
    return "-" if v is None else (v if isinstance(v, str) else fmt % v)
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if r["bench"] == "metadata":
        print("\n# %s ranks=%s transport=%s commit=%s %s\n# %s\n%s" % (r["device"], r.get("ranks"), r.get("transport"),
              r["commit"], r["date"], r["command"], head))
    elif "unavailable" in r:
        print("%-5s %-14s unavailable: %s" % (r["size"], r["mode"], r["unavailable"]))
    else:
        print("%-5s %-14s %5s %4s %6d %10.2f %10s %10s %9.1f %8s %6s %10.2f %12s %9s" % (
            r["size"], r["mode"], r.get("ranks", 1), r.get("gpus", 1), r["iters"], r["us_per_iter"],
            f(r.get("nocomm_us_per_iter"), "%.2f"), f(r.get("overhead_us_per_iter"), "%.2f"), r["gflops"],
            f(r.get("speedup"), "%.3f"), f(r.get("efficiency"), "%.3f"), r["cpu_us_per_iter"],
            f(r.get("energy_mj_per_iter"), "%.3f"), f(r.get("gosa_rel_diff"), "%.1e")))
PY
cat "$OUT/bench.txt" >> "$S"
cat "$OUT/bench.txt"
log "plot"
python3 bench/himeno/plot_multi.py "$OUT/speedup.png" "$J" 2>&1 | tail -3 | tee -a "$S"
log "done in ${SECONDS}s"
