# Pins the memory-ordering instructions of a kernel's PTX against a list.
#
#   cmake [-DBUILD_DIR=<build> -DTARGET=<target>] -DPTX=<file.ptx> -DEXPECTED=<file> -P check_ptx_order.cmake
#
# Counts loads and stores with a memory order (relaxed, acquire, release, volatile), fences,
# membars and atomics, in PTX order, and compares them with the first word of each line of
# EXPECTED ('#' starts a comment; the rest of a line says why). A different sequence fails
# here on purpose: an ordering change must be looked at and the list updated together with
# the reasoning in device_api/include/gpuverbs/sync.hpp.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/ptx_ops.cmake)
if(NOT EXISTS "${EXPECTED}")
  message(FATAL_ERROR "no list of expected instructions at '${EXPECTED}'")
endif()
gv_ptx_ops("(ld|st)\\.(relaxed|acquire|release|volatile)|fence|membar|atom|red" got)

file(STRINGS "${EXPECTED}" rows)
set(want)
foreach(row IN LISTS rows)
  string(REGEX REPLACE "#.*$" "" row "${row}")
  string(STRIP "${row}" row)
  if(row MATCHES "^([^ \t]+)")
    list(APPEND want "${CMAKE_MATCH_1}")
  endif()
endforeach()

if(NOT got STREQUAL want)
  string(REPLACE ";" "\n  " w "${want}")
  string(REPLACE ";" "\n  " g "${got}")
  message(FATAL_ERROR "memory ordering changed (${EXPECTED}).\nexpected:\n  ${w}\ngot:\n  ${g}")
endif()
list(LENGTH got n)
message(STATUS "PTX ordering as pinned: ${n} instructions")
