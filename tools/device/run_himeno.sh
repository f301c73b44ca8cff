#!/usr/bin/env bash
# Himeno on one GPU, on the GPU machine: build, GPU + host tests, planes-per-block sweep at L, the
# XS..XL table (double and float arithmetic, plus top/bottom launches at L), DRAM bytes of
# one sweep from ncu, and the load widths in the SASS. Writes everything under $OUT
# (or ./himeno-out), prints the table last.
set -uo pipefail
out=${OUT:-himeno-out}
mkdir -p "$out"
build=build-himeno-device
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv >"$out/env.txt" 2>&1
nvcc --version | tail -1 >>"$out/env.txt"
{ cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build $build -j16 --target himeno_bench himeno_gpu_test himeno_host_test; } >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log"; exit 1; }

{ $build/tests/himeno/himeno_gpu_test; echo "gpu_test rc=$?"; $build/tests/himeno/himeno_host_test; echo "host_test rc=$?"; } >"$out/tests.log" 2>&1
grep -E "PASSED|FAILED|rc=|SKIPPED \]" "$out/tests.log"

bench=$build/bench/himeno/himeno_bench
: >"$out/sweep.jsonl"
for arith in double float; do
  for ppb in 2 4 8 16 32; do
    $bench --size L --iters 50 --reps 5 --arith $arith --planes-per-block $ppb --json >>"$out/sweep.jsonl" || echo "sweep failed: $arith $ppb"
  done
done
best=$(python3 -c "
import json,sys
rows=[json.loads(l) for l in open('$out/sweep.jsonl') if l.strip() and json.loads(l)['arith']=='double']
print(max(rows,key=lambda r:r['gflops'])['planes_per_block'])")
echo "best planes per block at L (double): $best"

: >"$out/results.jsonl"
for arith in double float; do
  for size in XS S M L XL; do
    $bench --size $size --iters 100 --reps 5 --arith $arith --planes-per-block "$best" --json >>"$out/results.jsonl" || echo "bench failed: $size $arith"
  done
done
$bench --size L --iters 100 --reps 5 --split --planes-per-block "$best" --json >>"$out/results.jsonl"

ncu --clock-control none --kernel-name regex:sweep_kernel --launch-skip 10 --launch-count 1 \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_bytes.sum \
  $bench --size L --iters 20 --reps 1 --planes-per-block "$best" >"$out/ncu.log" 2>&1 || echo "ncu failed (see ncu.log)"
grep -E "dram__|gpu__time|lts__" "$out/ncu.log"
cuobjdump --dump-sass $bench 2>/dev/null | grep -oE "(LDG|STG|LDL|STL)[A-Z0-9._]*" | sort | uniq -c >"$out/sass.txt"
cat "$out/sass.txt"

python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
print("%-4s %-6s %-5s %4s %15s %9s %9s %5s %8s %8s %6s %8s" % ("size", "arith", "split", "ppb", "gosa", "t_med_ms", "GFLOPS", "B/pt", "GB/s", "copyGB/s", "frac", "ceilGF"))
for name in ("sweep.jsonl", "results.jsonl"):
    print("--", name)
    for l in open(f"{out}/{name}"):
        if not l.strip(): continue
        r = json.loads(l)
        print("%-4s %-6s %-5s %4d %15.9e %9.3f %9.1f %5d %8.1f %8.1f %6.3f %8.1f" % (r["size"], r["arith"], r["split"], r["planes_per_block"], r["gosa"], r["time_ms_median"], r["gflops"], r["bytes_per_point"], r["achieved_gbs"], r["copy_gbs"], r["fraction_of_copy_bw"], r["ceiling_gflops"]))
PY
