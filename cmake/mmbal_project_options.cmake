# Settings for the project's own targets only (tests, benchmarks, examples); never forced on
# consumers of mmbal::mmbal.
add_library(mmbal_project_options INTERFACE)
target_compile_options(mmbal_project_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>)
target_link_libraries(mmbal_project_options INTERFACE mmbal::mmbal)
# GCC's -Wmaybe-uninitialized reports false positives under -fsanitize (GCC documents that
# sanitizers perturb this analysis; e.g. std::optional<double> members of a defaulted
# aggregate). The sanitize build keeps every other warning as an error.
if(MMBAL_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(mmbal_project_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()

# Where the shipped real length data lives (generators load it at run time).
set(MMBAL_DATA_DIR "${PROJECT_SOURCE_DIR}/data")
