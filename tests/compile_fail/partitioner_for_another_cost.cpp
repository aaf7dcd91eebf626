// compile-fail: phase_partitioner
// A partitioner paired with a cost it cannot run: `conv_lpt` takes only the conv cost, handed
// to the orchestrator's phase_balancer with `tokens`. Without MMBAL_COMPILE_FAIL_CONTROL the
// pairing must be rejected naming the concept; with it (the conv cost) the file compiles.
#include <mmbal/orchestrate/policy.hpp>

#ifdef MMBAL_COMPILE_FAIL_CONTROL
using pairing_cost = mmbal::cost::conv_attention;
#else
using pairing_cost = mmbal::cost::tokens;
#endif

int main() { const mmbal::orchestrate::phase_balancer p(mmbal::balance::conv_lpt{}, pairing_cost{}); }
