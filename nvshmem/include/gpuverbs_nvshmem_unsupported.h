// The NVSHMEM calls gpuverbs' face does not provide: each is a template whose use fails to
// compile with a message naming it, instead of linking against something that does not exist
// or, worse, doing something else.
// A part of nvshmem.h: included on its own, it brings the whole face (nvshmem.h includes this
// file at its end, and its guard makes this include a no-op there).
#include "nvshmem.h"
#ifndef GPUVERBS_NVSHMEM_UNSUPPORTED_H
#define GPUVERBS_NVSHMEM_UNSUPPORTED_H

namespace gv::nvshmem::detail {
template <class... A>
inline constexpr bool unsupported_v = false;
}  // namespace gv::nvshmem::detail

#define GV_NVSHMEM_UNSUPPORTED(NAME, WHY)                                                                  \
  template <class... A>                                                                                   \
  GV_NVSHMEM_HD inline void NAME(A...) {                                                                  \
    static_assert(gv::nvshmem::detail::unsupported_v<A...>, "gpuverbs nvshmem face: " #NAME " is not supported: " WHY); \
  }

#define GV_NVSHMEM_WHY_COLL "collectives are not implemented; use puts, signals and barrier_all"
#define GV_NVSHMEM_WHY_TEAM "only NVSHMEM_TEAM_WORLD and NVSHMEMX_TEAM_NODE exist"

GV_NVSHMEM_UNSUPPORTED(nvshmemx_init_attr, "initialise with nvshmem_init (MPI, gvrun or GV_RANK/GV_SIZE/GV_ROOT)")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_hostlib_init_attr, "initialise with nvshmem_init")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_get_uniqueid, "gpuverbs' rendezvous is GV_ROOT=host:port (see gvrun)")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_set_attr_uniqueid_args, "gpuverbs' rendezvous is GV_ROOT=host:port (see gvrun)")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_buffer_register, "over p2p any local buffer works; over ib local buffers must be in the heap")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_buffer_unregister, "buffer registration is not needed (see nvshmemx_buffer_register)")
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_split_strided, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_split_2d, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_destroy, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_translate_pe, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_get_config, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_team_sync, GV_NVSHMEM_WHY_TEAM)
GV_NVSHMEM_UNSUPPORTED(nvshmem_barrier, GV_NVSHMEM_WHY_TEAM "; use nvshmem_barrier_all")
GV_NVSHMEM_UNSUPPORTED(nvshmemx_barrier_on_stream, GV_NVSHMEM_WHY_TEAM "; use nvshmemx_barrier_all_on_stream")
GV_NVSHMEM_UNSUPPORTED(nvshmem_broadcastmem, GV_NVSHMEM_WHY_COLL)
GV_NVSHMEM_UNSUPPORTED(nvshmem_fcollectmem, GV_NVSHMEM_WHY_COLL)
GV_NVSHMEM_UNSUPPORTED(nvshmem_alltoallmem, GV_NVSHMEM_WHY_COLL)
GV_NVSHMEM_UNSUPPORTED(nvshmemx_broadcastmem_block, GV_NVSHMEM_WHY_COLL)
GV_NVSHMEM_UNSUPPORTED(nvshmemx_alltoallmem_block, GV_NVSHMEM_WHY_COLL)

#define GV_NVSHMEM_UNSUPPORTED_TYPED(NAME)                                                                 \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_broadcast, GV_NVSHMEM_WHY_COLL)                                  \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_fcollect, GV_NVSHMEM_WHY_COLL)                                   \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_alltoall, GV_NVSHMEM_WHY_COLL)                                   \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_sum_reduce, GV_NVSHMEM_WHY_COLL)                                 \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_max_reduce, GV_NVSHMEM_WHY_COLL)                                 \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_min_reduce, GV_NVSHMEM_WHY_COLL)                                 \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_prod_reduce, GV_NVSHMEM_WHY_COLL)                                \
  GV_NVSHMEM_UNSUPPORTED(nvshmemx_##NAME##_sum_reduce_block, GV_NVSHMEM_WHY_COLL)                          \
  GV_NVSHMEM_UNSUPPORTED(nvshmemx_##NAME##_sum_reduce_on_stream, GV_NVSHMEM_WHY_COLL)                      \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_iput, "strided puts are not implemented; put each element or block") \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_iget, "strided gets are not implemented; get each element or block") \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_wait_until_all, "wait on each word with nvshmem_<type>_wait_until") \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_wait_until_any, "wait on each word with nvshmem_<type>_wait_until") \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_wait_until_some, "wait on each word with nvshmem_<type>_wait_until") \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_test_all, "test each word with nvshmem_<type>_test")             \
  GV_NVSHMEM_UNSUPPORTED(nvshmem_##NAME##_test_any, "test each word with nvshmem_<type>_test")
GV_NVSHMEM_UNSUPPORTED_TYPED(float)
GV_NVSHMEM_UNSUPPORTED_TYPED(double)
GV_NVSHMEM_UNSUPPORTED_TYPED(char)
GV_NVSHMEM_UNSUPPORTED_TYPED(short)
GV_NVSHMEM_UNSUPPORTED_TYPED(int)
GV_NVSHMEM_UNSUPPORTED_TYPED(long)
GV_NVSHMEM_UNSUPPORTED_TYPED(longlong)
GV_NVSHMEM_UNSUPPORTED_TYPED(uint)
GV_NVSHMEM_UNSUPPORTED_TYPED(ulong)
GV_NVSHMEM_UNSUPPORTED_TYPED(ulonglong)
GV_NVSHMEM_UNSUPPORTED_TYPED(int32)
GV_NVSHMEM_UNSUPPORTED_TYPED(int64)
GV_NVSHMEM_UNSUPPORTED_TYPED(uint32)
GV_NVSHMEM_UNSUPPORTED_TYPED(uint64)
GV_NVSHMEM_UNSUPPORTED_TYPED(size)
// 2-byte words: the face waits on 4- and 8-byte words only.
GV_NVSHMEM_UNSUPPORTED(nvshmem_short_wait_until, "waits take 4- and 8-byte words; use int")
GV_NVSHMEM_UNSUPPORTED(nvshmem_ushort_wait_until, "waits take 4- and 8-byte words; use unsigned int")
GV_NVSHMEM_UNSUPPORTED(nvshmem_short_test, "tests take 4- and 8-byte words; use int")
GV_NVSHMEM_UNSUPPORTED(nvshmem_ushort_test, "tests take 4- and 8-byte words; use unsigned int")
#undef GV_NVSHMEM_UNSUPPORTED_TYPED

#endif  // GPUVERBS_NVSHMEM_UNSUPPORTED_H
