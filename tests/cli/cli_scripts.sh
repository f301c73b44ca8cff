# scripts/test.sh and scripts/run.sh: -h prints the usage and exits 0 without building or
# testing anything; test.sh refuses unknown arguments and stages before it starts.
#   bash cli_scripts.sh <source root>
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
root=$1
expect 0 "Stages:.*" bash "$root/scripts/test.sh" -h
expect 0 "consumer +install build/" bash "$root/scripts/test.sh" --help
expect 2 "unknown argument '--bogus'.*stages: setup build ctest asan tsan consumer" bash "$root/scripts/test.sh" --bogus
expect 2 "unknown stage 'ctst'" bash "$root/scripts/test.sh" ctest ctst
expect 0 "The main job" bash "$root/scripts/run.sh" -h
finish
