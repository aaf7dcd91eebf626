# Runs one compile-fail case (docs/DESIGN.md §4). Arguments: COMPILER, SOURCE, INCLUDE_DIR and,
# for a case, CONCEPT and DROP.
#   - without DROP (the fixture's control): SOURCE must compile;
#   - with DROP: SOURCE compiled with -DMMBAL_DROP=<DROP> (one member removed) must NOT compile,
#     and the diagnostic must name the concept ("<CONCEPT><").
set(command ${COMPILER} -std=c++20 -fsyntax-only -I${INCLUDE_DIR} ${SOURCE})
if(NOT DEFINED DROP)
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the control does not compile (its cases would test nothing):\n${out}")
  endif()
  message(STATUS "control compiles")
  return()
endif()

execute_process(COMMAND ${command} -DMMBAL_DROP=${DROP} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "compiled with ${DROP}, but a type missing that member of '${CONCEPT}' must be rejected")
endif()
if(NOT out MATCHES "(^|[^a-z_])${CONCEPT}<")
  message(FATAL_ERROR "rejected with ${DROP}, but the diagnostic does not name the concept '${CONCEPT}':\n${out}")
endif()
message(STATUS "rejected as expected with ${DROP}, naming '${CONCEPT}'")
