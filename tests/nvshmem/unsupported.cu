// Must not compile: a collective the gpuverbs face does not provide. The build test expects
// the compiler to stop with the face's message naming nvshmem_int_sum_reduce.
#include <nvshmem.h>

__global__ void reduce(int* dst, const int* src) { nvshmem_int_sum_reduce(NVSHMEM_TEAM_WORLD, dst, src, 1); }
