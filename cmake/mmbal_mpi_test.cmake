# mmbal_add_mpi_test(NAME <test> TARGET <executable> NP <ranks> [TIMEOUT <s>] [LABELS <l>...]
#                    [ENVIRONMENT <VAR=value>...] [ARGS <arg>...])
#
# Registers a ctest that runs <executable> under mpiexec on <ranks> processes. CI runs as root,
# hence --allow-run-as-root; the machine has fewer cores than ranks, hence --oversubscribe.
# OpenMPI allocates memory it never frees (by design), which LeakSanitizer would report at
# exit: in the sanitize build leak detection is off for these tests (ASan and UBSan stay on).
function(mmbal_add_mpi_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;TARGET;NP;TIMEOUT" "LABELS;ENVIRONMENT;ARGS")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  set(labels mpi ${arg_LABELS})
  set(env "OMPI_MCA_rmaps_base_oversubscribe=1" ${arg_ENVIRONMENT})
  if(MMBAL_SANITIZE)
    list(APPEND env "ASAN_OPTIONS=detect_leaks=0")
  endif()
  add_test(NAME ${arg_NAME}
    COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${arg_NP}
            ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  set_tests_properties(${arg_NAME} PROPERTIES TIMEOUT ${arg_TIMEOUT} LABELS "${labels}"
                       ENVIRONMENT "${env}")
endfunction()
