#include <mmbal/mmbal.hpp>

int second_unit() {
  const mmbal::cost::tokens cost;
  const mmbal::length_t lengths[] = {3, 4};
  return mmbal::batch_value(cost, lengths) == 7.0 ? 0 : 1;
}
