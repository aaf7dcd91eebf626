# The README's C++ example must be exactly tests/consumer/readme_example.cpp (which the
# consumer tests compile and run), so the documented example always builds.
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(FIND "${readme}" "```cpp\n${example}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain tests/consumer/readme_example.cpp verbatim in a ```cpp block")
endif()
