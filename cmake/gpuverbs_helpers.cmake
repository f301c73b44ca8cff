# gpuverbs_cuda_executable(<name> <sources...>): an executable made of CUDA code, or, on a
# machine without nvcc, nothing but a status line saying it was skipped.
function(gpuverbs_cuda_executable name)
  if(NOT GPUVERBS_HAVE_CUDA)
    message(STATUS "gpuverbs: skipping ${name} (needs nvcc)")
    return()
  endif()
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  set_target_properties(${name} PROPERTIES CUDA_RUNTIME_LIBRARY Static)
endfunction()

# gpuverbs_ptx_pin(<name> <target> <source> <script> [-DVAR=value...]): test `name` checks the sm_90
# PTX of `source` (whatever architectures the project builds for), compiled as OBJECT library
# `target` against gpuverbs::device_api, with CMake script `script` (relative to the calling
# directory unless absolute; tests/compile has them) given PTX, BUILD_DIR, TARGET, PTXAS and the
# further -D arguments. The caller adds what else the source needs to `target`.
function(gpuverbs_ptx_pin name target source script)
  add_library(${target} OBJECT ${source})
  target_link_libraries(${target} PRIVATE gpuverbs::device_api)
  target_compile_options(${target} PRIVATE --expt-relaxed-constexpr)
  set_target_properties(${target} PROPERTIES CUDA_PTX_COMPILATION ON CUDA_ARCHITECTURES 90)
  get_filename_component(script "${script}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(cuda_bin ${CMAKE_CUDA_COMPILER} DIRECTORY)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${PROJECT_BINARY_DIR} -DTARGET=${target}
                   "-DPTX=$<TARGET_OBJECTS:${target}>" -DPTXAS=${cuda_bin}/ptxas ${ARGN} -P ${script})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 300)
endfunction()

# gpuverbs_install_headers(TARGET <t> ROOT <dir> [SUBDIR <sub>] [DESTINATION <dest>] [CUDA_ONLY]):
# installs the headers (*.hpp, *.h) under ROOT/SUBDIR into ${CMAKE_INSTALL_INCLUDEDIR}/DEST
# (DEST defaults to SUBDIR), and records them for tests/compile, which compiles each on its own
# as `#include <SUBDIR/file>` with TARGET's usage requirements (and, unless CUDA_ONLY, with the
# host compiler too). ROOT is the include directory TARGET gives its users in the build tree.
# Every installed header goes through here, so the check covers what is installed.
function(gpuverbs_install_headers)
  cmake_parse_arguments(A "CUDA_ONLY" "TARGET;ROOT;SUBDIR;DESTINATION" "" ${ARGN})
  if(NOT DEFINED A_DESTINATION)
    set(A_DESTINATION "${A_SUBDIR}")
  endif()
  set(dir "${A_ROOT}")
  if(A_SUBDIR)
    set(dir "${A_ROOT}/${A_SUBDIR}")
  endif()
  install(DIRECTORY "${dir}/" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/${A_DESTINATION}"
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
  set(langs CXX CUDA)
  if(A_CUDA_ONLY)
    set(langs CUDA)
  endif()
  string(REPLACE ";" "," langs "${langs}")
  set_property(GLOBAL APPEND PROPERTY GPUVERBS_INSTALLED_HEADERS "${A_TARGET}|${dir}|${A_SUBDIR}|${langs}")
endfunction()

# gpuverbs_link_nvshmem(<target>): builds `target` (an NVSHMEM-API program) against the NVSHMEM
# install GPUVERBS_NVSHMEM_HOME names instead of gpuverbs' face: its headers, its device library
# (relocatable device code, as NVSHMEM requires) and its host library.
function(gpuverbs_link_nvshmem target)
  find_library(gv_nvshmem_host NAMES nvshmem_host libnvshmem_host.so.3 PATHS ${GPUVERBS_NVSHMEM_HOME}/lib NO_DEFAULT_PATH
               REQUIRED)
  find_library(gv_nvshmem_device NAMES nvshmem_device PATHS ${GPUVERBS_NVSHMEM_HOME}/lib NO_DEFAULT_PATH REQUIRED)
  target_include_directories(${target} PRIVATE ${GPUVERBS_NVSHMEM_HOME}/include)
  set_target_properties(${target} PROPERTIES CUDA_SEPARABLE_COMPILATION ON CUDA_RESOLVE_DEVICE_SYMBOLS ON
                                             CUDA_RUNTIME_LIBRARY Shared)
  target_link_libraries(${target} PRIVATE ${gv_nvshmem_device} ${gv_nvshmem_host} CUDA::cuda_driver)
endfunction()
