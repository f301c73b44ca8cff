# cmake -DCOMPILER=... -DFLAGS=... -DSOURCE=... -DEXPECT=... -P expect_compile_error.cmake
# Passes when compiling SOURCE fails and the diagnostics contain EXPECT.
separate_arguments(flags UNIX_COMMAND "${FLAGS}")
execute_process(COMMAND ${COMPILER} ${flags} -c ${SOURCE} -o /dev/null
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must not")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed to compile without the expected message '${EXPECT}':\n${out}${err}")
endif()
message(STATUS "refused as expected: ${EXPECT}")
