#!/usr/bin/env bash
# tools/device/carry_build.sh BUILD OUT.tgz: the built tree BUILD, packed with only what running its
# programs and tests needs (executables, stripped of host symbols; shared libraries; ctest files;
# generated headers), to be copied to the GPU machine instead of being built there (a full build
# takes 4-7 minutes there). Packed: the unpacked binaries are several times larger. The GPU
# machine unpacks it where BUILD was, since the ctest files name BUILD's absolute path
# (tools/device/run_carried.sh does). Both machines are x86-64 and the programs link only
# libraries the GPU machine has.
set -euo pipefail
if [[ $# -ne 2 || $1 == -h || $1 == --help ]]; then
  echo "usage: tools/device/carry_build.sh BUILD OUT.tgz   (e.g. build-gpu build-gpu.tgz)"; exit 2
fi
src=$1
tgz=$(realpath -m "$2")
[[ -f $src/CMakeCache.txt ]] || { echo "carry_build: $src is not a CMake build tree" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dst=$stage/$(basename "$src")
cd "$src"
find . -path '*/CMakeFiles' -prune -o -type f \( -name CTestTestfile.cmake -o -name '*_tests.cmake' \
  -o -name '*_include.cmake' -o -name '*.hpp' -o -name '*.h' -o -name '*.so*' -o -perm -u+x \) -print |
  while read -r f; do
    mkdir -p "$dst/$(dirname "$f")"
    cp -p "$f" "$dst/$f"
    if [[ $(head -c 4 "$f" | tail -c 3) == ELF ]]; then strip --strip-unneeded "$dst/$f"; fi
  done
tar -C "$stage" -czf "$tgz" "$(basename "$src")"
du -sh "$tgz"
