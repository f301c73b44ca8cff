#!/usr/bin/env bash
# bench/scope/run_record.sh GV_SCOPE OUTDIR [LIMIT_S] [gv_scope args...]: the result of record
# for one machine. gv_scope's default run in three parts (explicit copies; zero-copy, unified
# memory, latency and launch; Atomic-RMW), each to its own JSON under a time limit (LIMIT_S
# seconds each, default 300) so one slow part cannot lose the others; then nvidia-smi -q, the
# markdown summary and, where matplotlib is installed, the PNGs. Extra arguments go to every part
# (e.g. --cuda 1). GV_SCOPE_PARTS (e.g. "copies atomics") runs only those parts, for a record
# taken in more than one sitting: summarize.py and plot.py then take every part's JSON.
set -uo pipefail
if [[ $# -lt 2 || $1 == -h || $1 == --help ]]; then
  sed -n '2,7p' "$0"; exit 2
fi
bin=$1 out=$2 limit=${3:-300}
shift $(( $# >= 3 ? 3 : 2 ))
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
parts=(copies '^Comm_(Plain_)?cudaMemcpy' paths '^Comm_(Plain_)?(ZeroCopy|UM_|Latency|cudart)' atomics '^Comm_(Plain_)?AtomicRMW')
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1 || echo "nvidia-smi -q failed" >&2
jsons=()
for ((i = 0; i < ${#parts[@]}; i += 2)); do
  name=${parts[i]} filter=${parts[i + 1]}
  [[ -n ${GV_SCOPE_PARTS:-} && " $GV_SCOPE_PARTS " != *" $name "* ]] && continue
  t0=$SECONDS
  timeout -k 5 "$limit" stdbuf -oL "$bin" "$@" --benchmark_filter="$filter" --benchmark_out="$out/scope-$name.json" \
    --benchmark_out_format=json > "$out/scope-$name.log" 2>&1
  echo "part $name: exit $? in $((SECONDS - t0)) s" | tee -a "$out/parts.txt"
  [[ -s $out/scope-$name.json ]] && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$out/scope-$name.json" 2>/dev/null &&
    jsons+=("$out/scope-$name.json")
done
((${#jsons[@]})) || { echo "no part produced JSON" >&2; exit 1; }
python3 "$here/summarize.py" --smi "$out/nvidia-smi-q.txt" --command "$(basename "$bin") $* --benchmark_filter=<part> (bench/scope/run_record.sh)" \
  --commit "${GV_COMMIT:-unknown}" --date "$(date -u +%Y-%m-%dT%H:%MZ)" "${jsons[@]}" > "$out/summary.md"
python3 "$here/plot.py" "$out" "${jsons[@]}" || echo "plot.py failed (matplotlib missing?)" | tee -a "$out/parts.txt"
