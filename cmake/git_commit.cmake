# Writes OUT (a header defining GV_GIT_COMMIT) from `git describe` of SRC, rewriting it only when
# the commit changes, so benchmarks name the tree they were built from. Run at every build.
# GV_GIT_COMMIT in the environment wins: a copy of the tree without its history (a device
# machine) is told its commit.
if(DEFINED ENV{GV_GIT_COMMIT} AND NOT "$ENV{GV_GIT_COMMIT}" STREQUAL "")
  set(c "$ENV{GV_GIT_COMMIT}")
else()
  execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE c
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR c STREQUAL "")
    set(c "unknown")
  else()
    execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty ERROR_QUIET)
    if(NOT dirty STREQUAL "")
      set(c "${c}-dirty")
    endif()
  endif()
endif()
set(text "#define GV_GIT_COMMIT \"${c}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
