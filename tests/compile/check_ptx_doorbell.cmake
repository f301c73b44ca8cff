# Pins the doorbell ordering of gv::ib::post_send<Ownership::kExclusive> in sm_90 PTX.
#
#   cmake [-DBUILD_DIR=<build> -DTARGET=<target>] -DPTX=<file.ptx> -P check_ptx_doorbell.cmake
#
# The publishing tail of a post, as nvcc emits it today (CUDA 13.0, sm_90), must read, counting
# only memory-ordering instructions (stores, fences, atomics) and ignoring everything else.
# The ordering scope is the queue's executor (QpHandle::executor): system for a NIC or a CPU
# engine, gpu for an engine on the same GPU; both arms of that branch appear in PTX order:
#
#   st.release.sys.b32       wqe_visible_before_dbrec(): the doorbell record, released at
#   st.release.gpu.b32       the executor's scope, so every WQE byte (this lane's, and other
#                            lanes' after bar.warp.sync: release is cumulative) is visible first
#   st.release.sys.b64       dbrec_before_doorbell(): the 64-bit doorbell (first 8 bytes of the
#   st.release.gpu.b64       last ctrl segment), released, so the record is visible first
#
# No WQE store may come between them. Exactly one 32-bit system-scope store (the record) may
# exist in the kernel. A different
# sequence fails here on purpose: an ordering change must be looked at and this pin updated
# together with the reasoning in device_api/sync.hpp.
cmake_minimum_required(VERSION 3.25)
if(BUILD_DIR AND TARGET)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "building ${TARGET} failed (${rc})")
  endif()
endif()
if(NOT EXISTS "${PTX}")
  message(FATAL_ERROR "no PTX at '${PTX}'")
endif()

# file(STRINGS) splits lines at ";" (PTX ends every instruction with one): each piece is a line.
file(STRINGS "${PTX}" lines)
set(ops)          # memory-ordering instructions, in order
foreach(line IN LISTS lines)
  string(REGEX REPLACE "//.*$" "" line "${line}")
  string(STRIP "${line}" line)
  # optional predicate guard, then the instruction
  if(line MATCHES "^(@!?%p[0-9]+[ \t]+)?((st|fence|membar|atom|red)\\.[^ \t;]*)")
    list(APPEND ops "${CMAKE_MATCH_2}")
  endif()
endforeach()

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
    set(dbrec ${i})
  endif()
endforeach()

string(REPLACE ";" "\n  " all "${ops}")
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected exactly one 32-bit system-scope store (the doorbell record), "
                      "found ${count}. Memory-ordering instructions:\n  ${all}")
endif()

set(expected "st.release.sys.b32;st.release.gpu.b32;st.release.sys.b64;st.release.gpu.b64")
set(first ${dbrec})
math(EXPR last "${dbrec} + 3")
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
