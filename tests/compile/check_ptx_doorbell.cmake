# Pins the doorbell ordering of gv::ib::post_send<Ownership::kExclusive> in sm_90 PTX.
#
#   cmake [-DBUILD_DIR=<build> -DTARGET=<target>] -DPTX=<file.ptx> -P check_ptx_doorbell.cmake
#
# The publishing tail of a post, as nvcc emits it today (CUDA 13.0, sm_90), must read, counting
# only memory-ordering instructions (stores, fences, atomics) and ignoring everything else.
# The ordering scope is the queue's executor (QpHandle::executor): system for a NIC or a CPU
# engine, gpu for an engine on the same GPU. A software HCA polls the record itself
# (QpHandle::record_polled) and gets one fence for record and doorbell; a NIC gets the record
# released before the doorbell. Every arm of those branches appears, in this PTX order:
#
#   fence.acq_rel.sys        wqe_visible_before_dbrec_and_doorbell(), system scope: one fence
#   st.relaxed.sys.b32       orders every WQE byte (this lane's, and other lanes' after
#   st.relaxed.sys.b64       bar.warp.sync: fences are cumulative) before the record and the
#                            64-bit doorbell (first 8 bytes of the last ctrl segment)
#   st.release.sys.b32       wqe_visible_before_dbrec() for a NIC: the record, released
#   fence.acq_rel.gpu        the software HCA's arm at gpu scope (an engine on this GPU)
#   st.relaxed.gpu.b32
#   st.relaxed.gpu.b64
#   st.release.gpu.b32       wqe_visible_before_dbrec(), gpu scope
#   st.release.sys.b64       dbrec_before_doorbell() for a NIC: the doorbell, released, so the
#   st.release.gpu.b64       record is visible first
#
# No WQE store may come between them. Exactly two 32-bit system-scope stores (the record's two
# arms) may exist in the kernel. A different
# sequence fails here on purpose: an ordering change must be looked at and this pin updated
# together with the reasoning in device_api/include/gpuverbs/sync.hpp.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/ptx_ops.cmake)
gv_ptx_ops("st|fence|membar|atom|red" ops)  # memory-ordering instructions, in order

list(LENGTH ops n)
set(dbrec -1)
set(count 0)
foreach(i RANGE 0 ${n})
  if(i EQUAL n)
    break()
  endif()
  list(GET ops ${i} op)
  if(op MATCHES "^st\\.[a-z_.]*sys[a-z_.]*\\.(b|u|s)32$")
    math(EXPR count "${count} + 1")
    if(dbrec LESS 0)
      set(dbrec ${i})
    endif()
  endif()
endforeach()

string(REPLACE ";" "\n  " all "${ops}")
if(NOT count EQUAL 2)
  message(FATAL_ERROR "expected exactly two 32-bit system-scope stores (the doorbell record's "
                      "two arms), found ${count}. Memory-ordering instructions:\n  ${all}")
endif()

set(expected "fence.acq_rel.sys;st.relaxed.sys.b32;st.relaxed.sys.b64;st.release.sys.b32;"
             "fence.acq_rel.gpu;st.relaxed.gpu.b32;st.relaxed.gpu.b64;st.release.gpu.b32;"
             "st.release.sys.b64;st.release.gpu.b64")
string(REPLACE ";;" ";" expected "${expected}")
list(LENGTH expected want)
math(EXPR first "${dbrec} - 1")
math(EXPR last "${first} + ${want} - 1")
if(first LESS 0 OR NOT last LESS n)
  message(FATAL_ERROR "the doorbell record store has no neighbours. Instructions:\n  ${all}")
endif()
set(got)
foreach(i RANGE ${first} ${last})
  list(GET ops ${i} op)
  list(APPEND got "${op}")
endforeach()
if(NOT got STREQUAL expected)
  string(REPLACE ";" "\n  " e "${expected}")
  string(REPLACE ";" "\n  " g "${got}")
  message(FATAL_ERROR "doorbell ordering changed.\nexpected:\n  ${e}\ngot:\n  ${g}\n"
                      "all memory-ordering instructions:\n  ${all}")
endif()
message(STATUS "PTX doorbell ordering as pinned: ${got}")
