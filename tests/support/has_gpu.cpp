// Exit 0 when a CUDA GPU is usable, 77 (ctest's skip code in these tests) when not, saying why.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return 0;
  std::printf("skipped: no NVIDIA GPU or driver found (%s)\n", e == cudaSuccess ? "no device" : cudaGetErrorName(e));
  return 77;
}
