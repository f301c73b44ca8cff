#!/usr/bin/env bash
# bench/carry_build.sh BUILD OUT: a copy of the built tree BUILD holding only what running its
# programs and tests needs (executables, stripped of host symbols; shared libraries; ctest files;
# generated headers), to travel to the device machine with the device tool's `carry` instead of
# building there (a full build takes that machine 4-7 minutes of a 30-minute budget; this
# machine builds for free). The device machine runs the tree where it was built: the ctest files
# name BUILD's absolute path, so there `mv OUT BUILD` first (bench/run_device_session.sh does).
# Both machines are x86-64 and the programs link only libraries the device image has.
set -euo pipefail
if [[ $# -ne 2 || $1 == -h || $1 == --help ]]; then
  echo "usage: bench/carry_build.sh BUILD OUT   (e.g. build-gpu build-slim)"; exit 2
fi
src=$1
dst=$(realpath -m "$2")
[[ -f $src/CMakeCache.txt ]] || { echo "carry_build: $src is not a CMake build tree" >&2; exit 1; }
rm -rf "$dst"
mkdir -p "$dst"
cd "$src"
find . -path '*/CMakeFiles' -prune -o -type f \( -name CTestTestfile.cmake -o -name '*_tests.cmake' \
  -o -name '*_include.cmake' -o -name '*.hpp' -o -name '*.h' -o -name '*.so*' -o -perm -u+x \) -print |
  while read -r f; do
    mkdir -p "$dst/$(dirname "$f")"
    cp -p "$f" "$dst/$f"
    if [[ $(head -c 4 "$f" | tail -c 3) == ELF ]]; then strip --strip-unneeded "$dst/$f"; fi
  done
du -sh "$dst"
