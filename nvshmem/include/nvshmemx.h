// nvshmemx.h — NVSHMEM's extensions (warp/block variants, _on_stream, collective_launch) live
// in nvshmem.h in gpuverbs' face; this header exists so that programs including it build.
#ifndef GPUVERBS_NVSHMEMX_H
#define GPUVERBS_NVSHMEMX_H
#include "nvshmem.h"
#endif
