# Pins that a kernel's PTX orders its messages without fences: no fence, membar or atomic, the
# words stored and polled with relaxed (volatile) accesses, and at most MAX_ACQUIRE acquire loads.
#
#   cmake [-DBUILD_DIR=<build> -DTARGET=<target>] -DPTX=<file.ptx> -DMAX_ACQUIRE=<n> -P check_ptx_no_fence.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/ptx_ops.cmake)
gv_ptx_ops("fence|membar|atom|red" ordering)
if(ordering)
  list(REMOVE_DUPLICATES ordering)
  message(FATAL_ERROR "a fence or atomic appeared where flag-in-data words need none: ${ordering}")
endif()
gv_ptx_ops("ld\\.acquire" acquires)
list(LENGTH acquires n_acquire)
if(n_acquire GREATER MAX_ACQUIRE)
  message(FATAL_ERROR "${n_acquire} acquire loads, at most ${MAX_ACQUIRE} expected")
endif()
gv_ptx_ops("st\\.volatile|ld\\.volatile" words)
list(LENGTH words n_words)
if(n_words EQUAL 0)
  message(FATAL_ERROR "no relaxed word stores or polls: the pinned code is not in this PTX")
endif()
message(STATUS "PTX as pinned: ${n_words} relaxed word accesses, ${n_acquire} acquire loads, no fence")
