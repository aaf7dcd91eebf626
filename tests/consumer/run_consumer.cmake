# Configures, builds and runs one consumer project (called by ctest with -P).
# Inputs: MODE (find_package | add_subdirectory), CONSUMER_DIR, WORK_DIR, GENERATOR,
# MMBAL_BUILD_DIR (find_package: installed from there), MMBAL_SOURCE_DIR (add_subdirectory).
file(REMOVE_RECURSE ${WORK_DIR})
if(MODE STREQUAL "find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${MMBAL_BUILD_DIR} --prefix ${WORK_DIR}/prefix
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "installing mmbal failed: ${rc}")
  endif()
  set(extra -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
else()
  set(extra -DMMBAL_SOURCE_DIR=${MMBAL_SOURCE_DIR})
endif()
foreach(step configure build run)
  if(step STREQUAL "configure")
    set(cmd ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release ${extra})
  elseif(step STREQUAL "build")
    set(cmd ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  else()
    set(cmd ${WORK_DIR}/build/consumer)
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "consumer ${MODE}: ${step} failed (${rc})")
  endif()
endforeach()
# A consumer machine without MPI or CUDA: the core target still configures (the transports'
# dependencies were required whenever the build had them), and the optional components are
# reported as not found.
if(MODE STREQUAL "find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/build-cpu-only -G ${GENERATOR} ${extra}
                          -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
                          -DCMAKE_DISABLE_FIND_PACKAGE_NCCL=ON
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc OR NOT out MATCHES "mpi component (FALSE|0|OFF)")
    message(FATAL_ERROR "consumer without MPI/CUDA: configure failed (${rc}) or reported mpi found:\n${out}")
  endif()
endif()
