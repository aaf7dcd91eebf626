// The spec layer's out-of-line definitions (include/mmbal/spec/separate_compilation.hpp),
// compiled once per build for the in-repository programs that link `mmbal_spec_separate`
// (the tool, the fuzz targets, the test suites): every built-in partitioner with every
// built-in cost is instantiated here instead of in each translation unit that names
// algorithms by spec. The library itself stays header-only; the Python module uses it so.
#include <mmbal/spec/separate_compilation.hpp>
