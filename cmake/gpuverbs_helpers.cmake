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
