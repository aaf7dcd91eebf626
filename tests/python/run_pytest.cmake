# Runs pytest over TEST_DIR against the build-tree package in PACKAGE_DIR (re-copying the
# pure-Python sources from SOURCE_DIR first, so edits are tested without a rebuild).
# pytest exits 5 when it collects nothing: that is a failure here, with a message.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_directory ${SOURCE_DIR} ${PACKAGE_DIR}/mmbal)
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PACKAGE_DIR} PYTHONDONTWRITEBYTECODE=1 MMBAL_SOURCE_DIR=${PROJECT_DIR}
          ${PYTHON} -m pytest -q -p no:cacheprovider ${TEST_DIR}
  RESULT_VARIABLE status)
if(status EQUAL 5)
  message(FATAL_ERROR "pytest collected no tests in ${TEST_DIR}")
elseif(NOT status EQUAL 0)
  message(FATAL_ERROR "pytest failed (exit status ${status})")
endif()
