#include <mmbal/mmbal.hpp>

#include <iostream>
#include <vector>

int main() {
  // LLM tokens of the samples every data-parallel rank gathered (identical on all ranks).
  const std::vector<mmbal::length_t> tokens{4096, 310, 1250, 2900, 75, 660, 1800, 3100, 980, 2200, 1500, 400};
  const mmbal::cost::attention cost{1.0, 1.0 / 8192};  // linear layers + attention
  const mmbal::assignment plan = mmbal::balance::lpt{}(tokens, 4, cost, {});
  plan.validate();  // every sample placed exactly once
  for (mmbal::item_id i = 0; i < plan.size(); ++i)
    std::cout << "sample " << i << " -> rank " << plan.where[i].rank << '\n';
  const double max_load = mmbal::summarize_loads(mmbal::bin_loads(plan, tokens, cost)).max;
  std::cout << "max / lower bound " << max_load / mmbal::lower_bound(tokens, 4, cost) << '\n';
}
