#!/usr/bin/env bash
# Every test gpuverbs has, in the order CI runs them. Stops at the first failure.
#
#   bash scripts/test.sh              # every stage
#   bash scripts/test.sh ctest tsan   # the named stages, in the order given
#   bash scripts/test.sh -h           # this text
#
# Stages:
#   setup     scripts/setup.sh (installs missing packages as root)
#   build     configure build/ (Release, CUDA when nvcc exists) and build everything
#   ctest     all tests in build/ (labels unit and gpu; gpu tests skip without a GPU)
#   asan      host tests (label unit) built with ASan+UBSan in build-asan/
#   tsan      host tests (label unit) built with TSan in build-tsan/
#   consumer  install build/ into a temporary prefix, build tests/consumer against it
#             (find_package(gpuverbs)) from a copy outside the source tree, run it
#   fuzz      build the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan in build-fuzz/
#             and run each for GV_FUZZ_SECONDS (default 10) from its committed corpus
#
# Environment: GV_JOBS (default nproc), GV_STAGES (default "setup build ctest asan tsan
# consumer fuzz": the stages to run when none are named), GV_BUILD_TYPE (default Release),
# GV_CTEST_TIMEOUT (seconds per test, default 300), GV_CTEST_ARGS (extra ctest arguments for
# every ctest stage, e.g. GV_CTEST_ARGS="-E SoftStress").
# Exit status: 0 when every stage passed, 1 when one failed, 2 for an unknown argument or stage.
set -uo pipefail
GV_SCRIPT=test
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$GV_ROOT"

ALL_STAGES="setup build ctest asan tsan consumer fuzz"
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
named=()
for a in "$@"; do
  case $a in
    -h | --help) usage; exit 0 ;;
    -*) echo "scripts/test.sh: unknown argument '$a' (stages: $ALL_STAGES; -h for help)" >&2; exit 2 ;;
    *) named+=("$a") ;;
  esac
done
if ((${#named[@]})); then STAGES=${named[*]}; else STAGES=${GV_STAGES:-$ALL_STAGES}; fi
for s in $STAGES; do
  [[ " $ALL_STAGES " == *" $s "* ]] ||
    { echo "scripts/test.sh: unknown stage '$s' (stages: $ALL_STAGES; -h for help)" >&2; exit 2; }
done
SUMMARY=()
T0=$SECONDS
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/gpuverbs-test.XXXXXX")
CTEST_TIMEOUT=${GV_CTEST_TIMEOUT:-300}  # seconds per test: a hung test fails instead of eating the CI budget

mapfile -t CUDA_ARGS < <(gv_cuda_args)
read -r -a CTEST_ARGS <<<"${GV_CTEST_ARGS:-}"

# ---- helpers ------------------------------------------------------------------------------

finish() {
  local rc=$1 what=$2
  printf '\n==== gpuverbs test summary (%ds total) ====\n' $((SECONDS - T0))
  printf '%s\n' "${SUMMARY[@]}"
  if ((rc == 0)); then
    printf 'ALL STAGES PASSED\n'
    rm -rf "$LOGDIR"
  else
    printf 'FAILED: %s (logs in %s)\n' "$what" "$LOGDIR"
  fi
  exit "$rc"
}

# run_stage NAME FUNCTION: runs the function in a subshell with errexit, records time + result.
run_stage() {
  local name=$1 fn=$2 start=$SECONDS rc
  gv_say "==== stage ${name} ===="
  : >"$LOGDIR/$name.note"
  (set -eo pipefail; "$fn")
  rc=$?
  local note
  note=$(cat "$LOGDIR/$name.note")
  if ((rc == 0)); then
    SUMMARY+=("$(printf '%-9s PASS %5ds  %s' "$name" $((SECONDS - start)) "$note")")
  else
    SUMMARY+=("$(printf '%-9s FAIL %5ds  %s' "$name" $((SECONDS - start)) "$note")")
    finish 1 "stage ${name} (exit ${rc}); its output is above"
  fi
}

note() { printf '%s ' "$*" >>"$LOGDIR/${CUR_STAGE}.note"; }

# ctest_counts LOG: "N tests, P passed, S skipped" from ctest's output.
ctest_counts() {
  local log=$1 total failed skipped
  total=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  skipped=$(grep -c -E '\*\*\*Skipped' "$log" || true)
  local bad
  bad=$(sed -n '/The following tests FAILED:/,$p' "$log" | sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\).*(\(.*\))$/\1 (\2)/p' | head -5 | paste -sd, -)
  echo "${total:-?} tests, $((${total:-0} - ${failed:-0} - skipped)) passed, ${skipped} skipped, ${failed:-?} failed${bad:+: $bad}"
}

# Sanitizer runtimes map their shadow memory at fixed addresses. Kernels with more mmap
# randomisation than the runtime expects (vm.mmap_rnd_bits > 28 on x86-64, e.g. Ubuntu 23.10+,
# kernels >= 6.5 with distro defaults) make TSan die at start with "unexpected memory
# mapping" (and ASan with "Shadow memory range interleaves"). Standard workarounds, in order:
# run without address randomisation (setarch -R, inherited by every child), or as root on
# CI lower vm.mmap_rnd_bits to 28. Sets SAN_WRAP to the command prefix that works.
SAN_WRAP=()
probe_sanitizer() {
  local flag=$1 dir
  dir=$(mktemp -d "$LOGDIR/probe-$flag.XXXX")
  cat >"$dir/p.cpp" <<'CPP'
#include <thread>
int main() { int x = 0; std::thread t([&] { x = 1; }); t.join(); return x - 1; }
CPP
  if ! c++ -std=c++20 -fsanitize="$flag" -g "$dir/p.cpp" -o "$dir/p" -pthread >"$dir/cc.log" 2>&1; then
    cat "$dir/cc.log"
    echo "cannot build with -fsanitize=$flag: the compiler's sanitizer runtime is missing" \
         "(Debian: libgcc-12-dev ships libasan8/libubsan1/libtsan2; apt-get install build-essential)"
    return 1
  fi
  if "$dir/p" >"$dir/run.log" 2>&1; then SAN_WRAP=(); return 0; fi
  echo "-fsanitize=$flag binaries fail to start here:"; head -5 "$dir/run.log"
  if command -v setarch >/dev/null && setarch "$(uname -m)" -R "$dir/p" >/dev/null 2>&1; then
    echo "workaround: running the $flag stage under 'setarch $(uname -m) -R' (no ASLR)"
    SAN_WRAP=(setarch "$(uname -m)" -R)
    return 0
  fi
  if [[ ${CI:-} == true && $(id -u) -eq 0 && -w /proc/sys/vm/mmap_rnd_bits ]]; then
    echo "workaround: CI as root: sysctl vm.mmap_rnd_bits=28 (was $(cat /proc/sys/vm/mmap_rnd_bits))"
    echo 28 >/proc/sys/vm/mmap_rnd_bits
    if "$dir/p" >/dev/null 2>&1; then SAN_WRAP=(); return 0; fi
  fi
  echo "no workaround worked; try: sudo sysctl vm.mmap_rnd_bits=28"
  return 1
}

# ---- stages -------------------------------------------------------------------------------

stage_setup() { bash scripts/setup.sh; }

stage_build() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE="$GV_BUILD_TYPE" "${CUDA_ARGS[@]}" >"$LOGDIR/configure.log" 2>&1 ||
    { cat "$LOGDIR/configure.log"; echo "cmake configure of build/ failed"; return 1; }
  grep -E 'gpuverbs:|CUDA compiler' "$LOGDIR/configure.log" || true
  if grep -q 'nvcc not found' "$LOGDIR/configure.log"; then note "no nvcc: CPU-only"; else note "with nvcc"; fi
  cmake --build build -j "$GV_JOBS"
}

stage_ctest() {
  local rc=0
  (cd build && ctest --output-on-failure --timeout "$CTEST_TIMEOUT" "${CTEST_ARGS[@]}") 2>&1 |
    tee "$LOGDIR/ctest.log" || rc=$?
  note "$(ctest_counts "$LOGDIR/ctest.log")"
  return "$rc"
}

# sanitizer_stage DIR SANITIZER
sanitizer_stage() {
  local dir=$1 san=$2 flag
  [[ $san == address ]] && flag=address,undefined || flag=thread
  probe_sanitizer "$flag"
  if ((${#SAN_WRAP[@]})); then note "(under ${SAN_WRAP[*]})"; fi
  # RelWithDebInfo: fast enough for the stress tests, with line numbers in reports.
  # Without MPI: Open MPI's own threads and allocations are not instrumented (the MPI bootstrap
  # runs in the ctest stage, label mpi).
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUVERBS_SANITIZE="$san" -DGPUVERBS_WITH_MPI=OFF \
    -DGPUVERBS_ENABLE_CUDA=OFF -DGPUVERBS_BUILD_BENCH=OFF -DGPUVERBS_BUILD_SAMPLES=OFF >"$LOGDIR/configure-$san.log" 2>&1 ||
    { cat "$LOGDIR/configure-$san.log"; echo "cmake configure of $dir failed"; return 1; }
  # The build runs the test binaries (gtest discovery), so it needs the same environment.
  "${SAN_WRAP[@]}" cmake --build "$dir" -j "$GV_JOBS"
  local rc=0
  (cd "$dir" && "${SAN_WRAP[@]}" ctest -L unit --output-on-failure --timeout "$CTEST_TIMEOUT" "${CTEST_ARGS[@]}") 2>&1 |
    tee "$LOGDIR/ctest-$san.log" || rc=$?
  note "$(ctest_counts "$LOGDIR/ctest-$san.log")"
  if grep -qE '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: [A-Za-z]+Sanitizer)|runtime error:' "$LOGDIR/ctest-$san.log"; then
    note "SANITIZER REPORT (grep the log above for 'Sanitizer'/'runtime error')"
  fi
  return "$rc"
}

stage_asan() {
  export ASAN_OPTIONS=halt_on_error=1:print_stacktrace=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  sanitizer_stage build-asan address
}

stage_tsan() {
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  sanitizer_stage build-tsan thread
}

# The harnesses and what they read are listed in tests/fuzz/CMakeLists.txt. New inputs a run
# finds go to a scratch corpus (the committed seeds stay small); a failing input is kept in
# the log directory and named in the stage's output.
stage_fuzz() {
  export ASAN_OPTIONS=print_stacktrace=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  command -v clang++ >/dev/null ||
    { echo "the fuzz stage needs clang++ and libFuzzer (Debian: clang libclang-rt-14-dev; scripts/setup.sh)"; return 1; }
  probe_sanitizer address,undefined
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUVERBS_BUILD_FUZZERS=ON \
    -DGPUVERBS_ENABLE_CUDA=OFF -DGPUVERBS_BUILD_TESTS=OFF -DGPUVERBS_BUILD_BENCH=OFF -DGPUVERBS_WITH_MPI=OFF \
    >"$LOGDIR/configure-fuzz.log" 2>&1 || { cat "$LOGDIR/configure-fuzz.log"; echo "cmake configure of build-fuzz/ failed"; return 1; }
  cmake --build build-fuzz -j "$GV_JOBS" --target gpuverbs_fuzzers
  local secs=${GV_FUZZ_SECONDS:-10} f scratch
  for f in $(sed -n 's/^set(GPUVERBS_FUZZERS \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt); do
    scratch=$(mktemp -d "$LOGDIR/corpus-$f.XXXX")
    if ! "${SAN_WRAP[@]}" "build-fuzz/tests/fuzz/$f" -max_total_time="$secs" -timeout=60 -print_final_stats=1 \
      -artifact_prefix="$LOGDIR/$f-" "$scratch" "tests/fuzz/corpus/$f" >"$LOGDIR/fuzz-$f.log" 2>&1; then
      tail -40 "$LOGDIR/fuzz-$f.log"
      echo "$f failed; the input is in $LOGDIR ($f-crash-* or $f-timeout-*); reproduce: build-fuzz/tests/fuzz/$f <input>"
      return 1
    fi
    note "$f $(sed -n 's/^stat::number_of_executed_units: *//p' "$LOGDIR/fuzz-$f.log") runs;"
  done
}

stage_consumer() {
  local tmp=$LOGDIR/consumer
  mkdir -p "$tmp"
  cmake --install build --prefix "$tmp/prefix" >"$LOGDIR/install.log" 2>&1 ||
    { cat "$LOGDIR/install.log"; echo "cmake --install build failed"; return 1; }
  [[ -f $tmp/prefix/share/doc/gpuverbs/LICENSE ]] || { echo "the install carries no LICENSE"; return 1; }
  # A copy outside the source tree: the consumer can only see the installed package.
  cp -r tests/consumer "$tmp/src"
  cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    "${CUDA_ARGS[@]}"
  cmake --build "$tmp/build" -j "$GV_JOBS"
  "$tmp/build/consumer_host"
  if [[ -x $tmp/build/consumer_kernel ]]; then note "host ran ok, kernel compiled"; else note "host ran ok, no nvcc: kernel skipped"; fi
  [[ -x $tmp/build/consumer_kernel ]] || return 0
  # CUDA enabled after find_package(gpuverbs): builds, or stops at configure time with the fix.
  mkdir -p "$tmp/late"
  cp tests/consumer/consumer_kernel.cu "$tmp/late/"
  cat >"$tmp/late/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(gpuverbs_late_cuda LANGUAGES CXX)
find_package(gpuverbs REQUIRED)
set(CMAKE_CUDA_ARCHITECTURES 90)
enable_language(CUDA)
add_executable(consumer_kernel consumer_kernel.cu)
target_link_libraries(consumer_kernel PRIVATE gpuverbs::host_setup gpuverbs::device_api)
set_target_properties(consumer_kernel PROPERTIES CUDA_STANDARD 20 CUDA_RUNTIME_LIBRARY Static)
CMAKE
  if cmake -S "$tmp/late" -B "$tmp/late-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" "${CUDA_ARGS[@]}" >"$LOGDIR/late.log" 2>&1; then
    cmake --build "$tmp/late-build" -j "$GV_JOBS" || { echo "CUDA enabled after find_package: configured but did not build"; return 1; }
    note "CUDA after find_package: builds"
  elif grep -q "CUDA was enabled after find_package(gpuverbs)" "$LOGDIR/late.log"; then
    note "CUDA after find_package: refused at configure time with the fix"
  else
    cat "$LOGDIR/late.log"; echo "CUDA enabled after find_package failed without gpuverbs' message"; return 1
  fi
}

for s in $STAGES; do
  CUR_STAGE=$s
  run_stage "$s" "stage_$s"
done
finish 0 ""
