# Shared by the GPU-machine scripts (sourced, not run): every step under a time limit cut to
# what is left before DEADLINE seconds into the script, so the whole script ends in time.
#   OUT       the folder of the call's files (set before sourcing; created here)
#   DEADLINE  seconds (set before sourcing)
#   S         the summary file, $OUT/summary.txt (set here)

mkdir -p "$OUT"
S="$OUT/summary.txt"

log() { echo "== [$SECONDS s] $*" | tee -a "$S"; }

# Seconds the next step may take: its own limit, or what is left before the deadline.
budget() { local left=$((DEADLINE - SECONDS)); echo $(( left < $1 ? left : $1 )); }

# limited LIMIT LOG CMD...: CMD under min(LIMIT, time left), output appended to LOG; prints
# "rc=N (T s)" (124: out of time), or "skipped (out of time)" when less than 10 s are left.
limited() {
  local t; t=$(budget "$1"); local logf=$2; shift 2
  if (( t < 10 )); then echo "skipped (out of time)"; return; fi
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" >> "$logf" 2>&1; echo "rc=$? ($((SECONDS - t0)) s)"
}
