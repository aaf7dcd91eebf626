// Two translation units that include every host header must link: inline functions and
// variables only, no non-inline definitions in headers.
#include <mmbal/mmbal.hpp>
#include <mmbal/spec/spec.hpp>  // the spec layer is not part of the umbrella

int second_unit();

int main() { return second_unit() == 0 ? 0 : 1; }
