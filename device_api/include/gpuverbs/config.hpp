// gpuverbs device API: compiler configuration shared by every header.
// Every device_api header compiles with nvcc (host and device passes) and with a plain C++20
// host compiler; GV_HD marks functions usable on both sides.
#pragma once

#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#error "gpuverbs needs C++20: compile with -std=c++20 (CMake: CXX_STANDARD 20, and CUDA_STANDARD 20 for .cu files)"
#endif

#if defined(__CUDACC__)
#define GV_HD __host__ __device__
#define GV_INLINE __forceinline__
#define GV_NOINLINE __noinline__
#else
#define GV_HD
#define GV_INLINE inline __attribute__((always_inline))
#define GV_NOINLINE __attribute__((noinline))
#endif

#if defined(__CUDA_ARCH__)
#define GV_DEVICE_PASS 1
#else
#define GV_DEVICE_PASS 0
#endif
