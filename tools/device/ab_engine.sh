#!/usr/bin/env bash
# tools/device/ab_engine.sh CMD...: the same gv_gpu_verbs commands with several builds, alternately, in
# one run, so that a change is compared with its base on the same machine and minute.
#
#   GV_AB="base=build-base/bench/gv_gpu_verbs new=build-new/bench/gv_gpu_verbs" GV_ROUNDS=2 \
#     bash tools/device/ab_engine.sh 'pingpong -s 8 -n 3000 --mode gpu-qgpu --gpus 1' 'drain'
#
# Each command (its words after the program's name) runs once with every build of GV_AB, in
# turn, GV_ROUNDS times (default 2). Tables go to $OUT/ab.txt under a line naming the build and
# the command; every build's --json rows to $OUT/ab-NAME.json (each run's rows after a row that
# names its commit, device, date and command). Each run is limited to GV_RUN_SECONDS (default
# 90); the whole script ends before GV_DEADLINE seconds (default 400), skipping what is left.
set -uo pipefail
OUT=${OUT:-/tmp/gv-out}
DEADLINE=${GV_DEADLINE:-400}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ $# -eq 0 || $1 == -h || $1 == --help || -z ${GV_AB:-} ]]; then
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  [[ ${1:-} == -h || ${1:-} == --help ]] && exit 0 || exit 2
fi
T="$OUT/ab.txt"
for r in $(seq 1 "${GV_ROUNDS:-2}"); do
  for cmd in "$@"; do
    for pair in $GV_AB; do
      name=${pair%%=*} bin=${pair#*=}
      [[ -x $bin ]] || { echo "ab_engine: $bin (build $name) is not an executable" | tee -a "$S"; exit 1; }
      echo "### round $r, $name: $cmd" >> "$T"
      # shellcheck disable=SC2086  # the command's words split as written
      echo "$name $cmd: $(limited "${GV_RUN_SECONDS:-90}" "$T" "$bin" $cmd --json "$OUT/ab-$name.json")" >> "$S"
    done
  done
done
cat "$S"
