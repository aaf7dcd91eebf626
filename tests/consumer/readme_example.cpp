#include <mmbal/mmbal.hpp>

#include <iostream>
#include <vector>

int main() {
  // LLM tokens of the samples every data-parallel rank gathered (identical on all ranks).
  const std::vector<mmbal::length_t> tokens{4096, 310, 1250, 2900, 75, 660, 1800, 3100};
  const mmbal::cost::attention cost{1.0, 1.0 / 4096};  // linear layers + attention
  const mmbal::assignment plan = mmbal::balance::lpt{}(tokens, 4, cost, {});
  const auto loads = mmbal::bin_loads(plan, tokens, cost);
  for (mmbal::item_id i = 0; i < plan.size(); ++i)
    std::cout << "sample " << i << " -> rank " << plan.where[i].rank << '\n';
  std::cout << "max/mean " << mmbal::summarize_loads(loads).max_over_mean << '\n';
  return mmbal::summarize_loads(loads).max_over_mean < 1.1 ? 0 : 1;
}
