# The spec layer (include/mmbal/spec/, docs/DESIGN.md §2) is included by the tool and the
# Python module only: fails when any other library header includes a spec header.
# Argument: INCLUDE_DIR.
file(GLOB_RECURSE headers ${INCLUDE_DIR}/mmbal/*.hpp ${INCLUDE_DIR}/mmbal/*.cuh)
set(offenders)
foreach(header IN LISTS headers)
  if(header MATCHES "/mmbal/spec/")
    continue()
  endif()
  file(STRINGS ${header} lines REGEX "#include[ \t]*[<\"]mmbal/spec/")
  if(lines)
    list(APPEND offenders "${header}: ${lines}")
  endif()
endforeach()
if(offenders)
  string(REPLACE ";" "\n" offenders "${offenders}")
  message(FATAL_ERROR "library headers outside mmbal/spec/ include the spec layer:\n${offenders}")
endif()
message(STATUS "no library header outside mmbal/spec/ includes it")
