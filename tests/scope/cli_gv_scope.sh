# gv_scope's command line: help exits 0; bad input (an unknown argument, a GPU or NUMA id that
# does not exist, sizes out of range, a filter that matches nothing) exits 2 with a message,
# before anything is measured; without a GPU a valid command line exits 1 saying why.
#   bash cli_gv_scope.sh <gv_scope> <gv_has_gpu>
source "$(dirname "${BASH_SOURCE[0]}")/../cli/expect.sh"
bin=$1
usage='usage: gv_scope'
expect 0 "$usage.*--cuda ID.*--numa ID.*--benchmark_filter" "$bin" --help
expect 0 "$usage" "$bin" -h
expect 2 "unknown argument '--bogus'" "$bin" --bogus
expect 2 "--cuda wants a whole number, got 'one'" "$bin" --cuda one
expect 2 "--cuda 4096: no such GPU" "$bin" --cuda 4096
expect 2 "--numa 4096: no such NUMA node \(this machine has [0-9]+ nodes?" "$bin" --numa 4096
expect 2 "--numa wants a NUMA node id >= 0" "$bin" --numa=-3
expect 2 "--sizes 4:20 is out of range: want 8 <= LO <= HI <= 33" "$bin" --sizes 4:20
expect 2 "--sizes 10:40 is out of range" "$bin" --sizes=10:40
expect 2 "--sizes 20:10 is out of range" "$bin" --sizes 20:10
expect 2 "--sizes wants LO:HI" "$bin" --sizes 12
expect 2 "--atomic-sweep wants default or full" "$bin" --atomic-sweep=all
if "$2" >/dev/null; then
  expect 2 "no benchmark matches the filter" "$bin" --benchmark_filter=NoSuchFamily
  expect 0 "Comm_cudaMemcpyAsync_PinnedToGPU/[0-9]+/0/log2\(N\):28.*Comm_AtomicRMW_FetchAdd_Contiguous_Device_GPU/[0-9]+/0/contention:1024/padding:1024" \
    "$bin" --cuda 0 --benchmark_list_tests
else
  expect 1 "gv_scope needs a GPU: no NVIDIA GPU or driver found" "$bin"
  expect 1 "gv_scope needs a GPU" "$bin" --benchmark_filter=Pinned --sizes 12:20
fi
finish
