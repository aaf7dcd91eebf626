#include <mmbal/mmbal.hpp>
#include <mmbal/spec/spec.hpp>  // the spec layer is not part of the umbrella

int second_unit() {
  const mmbal::cost::tokens cost;
  const mmbal::length_t lengths[] = {3, 4};
  return mmbal::batch_value(cost, lengths) == 7.0 ? 0 : 1;
}
