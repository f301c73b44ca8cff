# CUDA sources that use gpuverbs' device API are C++20 (CUDA_STANDARD 20). Some CMake versions,
# 3.25 among them, know no C++20 flag for nvcc: CUDA_STANDARD 20 then adds none (or, with
# CUDA_STANDARD_REQUIRED, refuses to generate) and nvcc compiles C++17, failing deep in the
# headers. Included by gpuverbs' own build and by its installed package config.

# Where CUDA is enabled with nvcc and CMake has no C++20 flag for it, give it -std=c++20: for
# the calling directory and those added after it. A macro, so the variables land there.
macro(gpuverbs_cuda20_flags)
  if(CMAKE_CUDA_COMPILER_LOADED AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
     AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    if(CMAKE_CUDA_COMPILER_VERSION VERSION_LESS 12.0)
      message(WARNING "gpuverbs: nvcc ${CMAKE_CUDA_COMPILER_VERSION} has no C++20; CUDA sources that use "
                      "gpuverbs' device API need nvcc 12.0 or newer")
    else()
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      message(STATUS "gpuverbs: CMake ${CMAKE_VERSION} knows no C++20 flag for nvcc "
                     "${CMAKE_CUDA_COMPILER_VERSION}: CUDA_STANDARD 20 uses -std=c++20")
    endif()
  endif()
endmacro()

# Deferred to the end of the directory that called find_package(gpuverbs) without CUDA enabled:
# CUDA enabled since, with the flag still unknown, cannot be fixed for the directories already
# read, so configuring stops and says what to do.
function(_gpuverbs_cuda20_late)
  if(CMAKE_CUDA_COMPILER_LOADED AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA"
     AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    message(FATAL_ERROR
      "gpuverbs: CUDA was enabled after find_package(gpuverbs), and CMake ${CMAKE_VERSION} knows no "
      "C++20 flag for nvcc ${CMAKE_CUDA_COMPILER_VERSION}: CUDA sources using gpuverbs' device API would "
      "compile as C++17 and fail. Enable CUDA before find_package(gpuverbs) (project(<name> LANGUAGES "
      "CXX CUDA), or enable_language(CUDA) first) and gpuverbs sets -std=c++20; or set "
      "CMAKE_CUDA20_STANDARD_COMPILE_OPTION and CMAKE_CUDA20_EXTENSION_COMPILE_OPTION to -std=c++20 "
      "yourself; or use a CMake that knows nvcc's C++20 flag.")
  endif()
endfunction()
