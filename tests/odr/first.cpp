// Two translation units that include every host header must link: inline functions and
// variables only, no non-inline definitions in headers.
#include <mmbal/mmbal.hpp>

int second_unit();

int main() { return second_unit() == 0 ? 0 : 1; }
