# Pins that every kernel of a PTX file assembles for sm_90 within MAX registers a thread.
#
#   cmake [-DBUILD_DIR=<build> -DTARGET=<target>] -DPTX=<file.ptx> -DPTXAS=<ptxas> -DMAX=<n>
#         [-DWARP_KERNELS=<regex> -DWARP_MAX=<n>] -P check_registers.cmake
#
# ptxas reports "Used N registers" per kernel; a kernel above MAX fails here with its count.
# Kernels whose mangled name matches WARP_KERNELS (launched as one thread or one warp a block, where a thread
# may have 255) are held to WARP_MAX instead.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/ptx_ops.cmake)
get_filename_component(cubin "${PTX}" NAME_WE)
set(cubin "${CMAKE_CURRENT_BINARY_DIR}/${cubin}.check_registers.cubin")
execute_process(COMMAND ${PTXAS} -arch=sm_90 -v "${PTX}" -o "${cubin}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
file(REMOVE "${cubin}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptxas failed (${rc}): ${out}")
endif()
string(REGEX MATCHALL "Compiling entry function '[^']+'|Used [0-9]+ registers" reports "${out}")
set(kernel "")
set(seen 0)
foreach(r IN LISTS reports)
  if(r MATCHES "Compiling entry function '([^']+)'")
    set(kernel "${CMAKE_MATCH_1}")
  elseif(r MATCHES "Used ([0-9]+) registers")
    set(used ${CMAKE_MATCH_1})
    math(EXPR seen "${seen} + 1")
    set(max ${MAX})
    if(DEFINED WARP_KERNELS AND kernel MATCHES "${WARP_KERNELS}")
      set(max ${WARP_MAX})
    endif()
    if(used GREATER max)
      message(FATAL_ERROR "${kernel}: ${used} registers, at most ${max} pinned")
    endif()
    message(STATUS "${kernel}: ${used} registers (at most ${max})")
  endif()
endforeach()
if(seen EQUAL 0)
  message(FATAL_ERROR "ptxas reported no kernel: ${out}")
endif()
