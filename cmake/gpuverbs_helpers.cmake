# gpuverbs_cuda_sources(<target> <sources...>): add CUDA sources when nvcc exists.
# Targets made only of CUDA code are created with gpuverbs_cuda_executable, which is a no-op
# (with a status line) on machines without nvcc.
function(gpuverbs_cuda_executable name)
  if(NOT GPUVERBS_HAVE_CUDA)
    message(STATUS "gpuverbs: skipping ${name} (needs nvcc)")
    return()
  endif()
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  set_target_properties(${name} PROPERTIES CUDA_RUNTIME_LIBRARY Static)
endfunction()
