# Shared by the PTX pins (check_ptx_doorbell.cmake, check_ptx_order.cmake), included in
# script mode: build TARGET in BUILD_DIR first when both are given (so that a stale build cannot
# pass; in a built tree a no-op), then read the PTX file PTX.

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

# The instructions of PTX whose opcode matches `pattern` (a regex for the opcode's first
# parts, e.g. "st|fence"), with their suffixes (st.release.sys.b32), in PTX order, into `out`.
function(gv_ptx_ops pattern out)
  # file(STRINGS) splits lines at ";" (PTX ends every instruction with one): each piece is a line.
  file(STRINGS "${PTX}" lines)
  set(ops)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "//.*$" "" line "${line}")
    string(STRIP "${line}" line)
    # optional predicate guard, then the instruction
    if(line MATCHES "^(@!?%p[0-9]+[ \t]+)?((${pattern})\\.[^ \t;]*)")
      list(APPEND ops "${CMAKE_MATCH_2}")
    endif()
  endforeach()
  set(${out} "${ops}" PARENT_SCOPE)
endfunction()
