# Runs one compile-fail case (docs/DESIGN.md §4): SOURCE's first line names the concept,
# "// compile-fail: <concept>". Passes only if
#   1. the control (SOURCE with -DMMBAL_COMPILE_FAIL_CONTROL, the missing member present)
#      compiles, so the failure below is caused by that member and nothing else, and
#   2. SOURCE itself does NOT compile, and the diagnostic names the concept ("<concept><").
# Arguments: COMPILER, SOURCE, INCLUDE_DIR.
file(STRINGS ${SOURCE} first_line LIMIT_COUNT 1)
if(NOT first_line MATCHES "^// compile-fail: ([a-z_]+)$")
  message(FATAL_ERROR "${SOURCE}: first line must be '// compile-fail: <concept>'")
endif()
set(concept ${CMAKE_MATCH_1})
set(command ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${SOURCE})

execute_process(COMMAND ${command} -DMMBAL_COMPILE_FAIL_CONTROL RESULT_VARIABLE control_rc
                OUTPUT_VARIABLE control_out ERROR_VARIABLE control_out)
if(NOT control_rc EQUAL 0)
  message(FATAL_ERROR "control does not compile (the case tests nothing):\n${control_out}")
endif()

execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "compiled, but a type missing one member of '${concept}' must be rejected")
endif()
if(NOT out MATCHES "(^|[^a-z_])${concept}<")
  message(FATAL_ERROR "rejected, but the diagnostic does not name the concept '${concept}':\n${out}")
endif()
message(STATUS "rejected as expected, naming '${concept}'")
