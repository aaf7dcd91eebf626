// Schedule simulators and the lower bound: closed forms, hand-worked cases, an independent
// event-by-event simulator, dependency checks on every recorded operation, brute force.
#include <mmbal/core/rng.hpp>
#include <mmbal/pipeline/orders.hpp>
#include <mmbal/pipeline/schedule.hpp>
#include <mmbal/spec/pipeline.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <vector>

using namespace mmbal::pipeline;

namespace {

stage_times random_times(mmbal::rng_engine& g, std::uint32_t p, std::uint32_t m, bool integers = false) {
  stage_times t(p, m);
  for (std::size_t i = 0; i < t.forward.size(); ++i) {
    t.forward[i] = integers ? static_cast<double>(mmbal::uniform_int(g, 0, 5)) : mmbal::uniform_real(g, 0.1, 3.0);
    t.backward[i] = integers ? static_cast<double>(mmbal::uniform_int(g, 0, 9)) : mmbal::uniform_real(g, 0.0, 6.0);
  }
  return t;
}

// An independent 1F1B / GPipe simulation: time advances from event to event; at each event
// every idle stage decides its next operation from its own counters (Megatron's rule written
// out again, without the operation tables) and starts it when its input has arrived.
double event_simulation(const stage_times& t, const std::vector<std::uint32_t>& order, bool gpipe, double hop) {
  const std::uint32_t p = t.stages, m = t.micro_batches;
  std::vector<std::uint32_t> fdone(p, 0), bdone(p, 0);
  std::vector<double> busy_until(p, 0.0);
  std::vector<std::vector<double>> fend(p, std::vector<double>(m, -1)), bend(p, std::vector<double>(m, -1));
  // the next operation of stage s: (backward?, position)
  auto next = [&](std::uint32_t s) -> std::pair<bool, std::uint32_t> {
    if (gpipe) return fdone[s] < m ? std::pair{false, fdone[s]} : std::pair{true, m - 1 - bdone[s]};
    const std::uint32_t warm = std::min(p - 1 - s, m);
    if (fdone[s] < warm) return {false, fdone[s]};
    if (fdone[s] == m) return {true, bdone[s]};
    // steady state: forward when as many backwards as forwards beyond the warm-up are done
    return fdone[s] - warm == bdone[s] ? std::pair{false, fdone[s]} : std::pair{true, bdone[s]};
  };
  double now = 0;
  std::uint32_t finished = 0;
  double makespan = 0;
  while (finished < p) {
    double next_time = std::numeric_limits<double>::infinity();
    finished = 0;
    for (std::uint32_t s = 0; s < p; ++s) {
      if (fdone[s] == m && bdone[s] == m) {
        ++finished;
        continue;
      }
      if (busy_until[s] > now) {
        next_time = std::min(next_time, busy_until[s]);
        continue;
      }
      const auto [back, k] = next(s);
      double ready;
      if (!back)
        ready = s == 0 ? 0 : (fend[s - 1][k] < 0 ? std::numeric_limits<double>::infinity() : fend[s - 1][k] + hop);
      else if (s == p - 1)
        ready = fend[s][k];
      else
        ready = bend[s + 1][k] < 0 ? std::numeric_limits<double>::infinity() : bend[s + 1][k] + hop;
      if (ready <= now) {
        const double len = back ? t.backward_time(s, order[k]) : t.forward_time(s, order[k]);
        busy_until[s] = now + len;
        (back ? bend : fend)[s][k] = now + len;
        ++(back ? bdone : fdone)[s];
        makespan = std::max(makespan, now + len);
        next_time = std::min(next_time, now);  // look again at this instant (zero-length ops)
      } else if (ready < std::numeric_limits<double>::infinity()) {
        next_time = std::min(next_time, ready);
      }
    }
    if (finished < p) {
      REQUIRE(next_time < std::numeric_limits<double>::infinity());
      now = next_time;
    }
  }
  return makespan;
}

// Every recorded operation starts exactly when both its predecessor on the stage and its data
// dependency have ended (plus a hop between stages), and covers every (stage, chunk, position,
// direction) once.
void check_operations(const stage_times& t, const std::vector<operation>& ops, std::uint32_t v, double hop,
                      double makespan) {
  const std::uint32_t p = t.stages, m = t.micro_batches;
  REQUIRE(ops.size() == std::size_t{2} * p * m * v);
  std::map<std::tuple<std::uint32_t, std::uint32_t, bool>, double> end;  // (virtual stage, position, back)
  std::vector<double> last(p, 0.0);
  double latest = 0;
  for (const operation& o : ops) {
    const std::uint32_t q = o.chunk * p + o.stage;
    double ready = 0;
    if (!o.backward && q > 0) ready = end.at({q - 1, o.position, false}) + (p > 1 ? hop : 0);
    if (o.backward) {
      ready = q == p * v - 1 ? end.at({q, o.position, false}) : end.at({q + 1, o.position, true}) + (p > 1 ? hop : 0);
    }
    CHECK(o.start == Approx(std::max(ready, last[o.stage])).margin(1e-12));
    const double len =
        (o.backward ? t.backward_time(o.stage, o.micro_batch) : t.forward_time(o.stage, o.micro_batch)) / v;
    CHECK(o.end == Approx(o.start + len).margin(1e-12));
    REQUIRE(end.emplace(std::tuple{q, o.position, o.backward}, o.end).second);
    last[o.stage] = o.end;
    latest = std::max(latest, o.end);
  }
  CHECK(latest == makespan);
}

std::vector<std::vector<std::uint32_t>> all_orders(std::uint32_t m) {
  std::vector<std::vector<std::uint32_t>> out;
  std::vector<std::uint32_t> o = identity_order(m);
  do out.push_back(o);
  while (std::next_permutation(o.begin(), o.end()));
  return out;
}

}  // namespace

TEST_CASE("1F1B with equal times has the closed form (m + p - 1)(F + B)") {
  for (std::uint32_t p : {1u, 2u, 3u, 4u, 8u})
    for (std::uint32_t m : {1u, 2u, 3u, 5u, 8u, 17u}) {
      stage_times t(p, m);
      std::fill(t.forward.begin(), t.forward.end(), 1.5);
      std::fill(t.backward.begin(), t.backward.end(), 2.25);
      const double expected = (m + p - 1) * (1.5 + 2.25);
      CHECK(simulate(t, identity_order(m)) == Approx(expected));
      CHECK(simulate(t, identity_order(m), {schedule_kind::interleaved, 1}) == Approx(expected));
      CHECK(lower_bound(t) <= expected * (1 + 1e-12));
      // GPipe with equal times: (m + p − 1)·F + (m + p − 1)·B as well.
      CHECK(simulate(t, identity_order(m), {schedule_kind::gpipe, 1}) == Approx(expected));
    }
}

TEST_CASE("1F1B hand-worked cases with unequal stages") {
  // p = 2, m = 2; stage 0: F = 1, B = 2; stage 1: F = 3, B = 1.
  // stage 0: F0 [0,1] F1 [1,2] B0 [5,7] B1 [9,11]; stage 1: F0 [1,4] B0 [4,5] F1 [5,8] B1 [8,9]
  stage_times a(2, 2);
  a.forward = {1, 1, 3, 3};
  a.backward = {2, 2, 1, 1};
  std::vector<operation> ops;
  CHECK(simulate(a, identity_order(2), {}, 0.0, &ops) == 11);
  std::sort(ops.begin(), ops.end(), [](const operation& x, const operation& y) {
    return std::tuple{x.stage, x.start} < std::tuple{y.stage, y.start};
  });
  const std::vector<std::tuple<bool, std::uint32_t, double, double>> want{
      {false, 0, 0, 1}, {false, 1, 1, 2}, {true, 0, 5, 7},  {true, 1, 9, 11},
      {false, 0, 1, 4}, {true, 0, 4, 5},  {false, 1, 5, 8}, {true, 1, 8, 9}};
  for (std::size_t k = 0; k < want.size(); ++k) {
    CHECK(ops[k].backward == std::get<0>(want[k]));
    CHECK(ops[k].position == std::get<1>(want[k]));
    CHECK(ops[k].start == std::get<2>(want[k]));
    CHECK(ops[k].end == std::get<3>(want[k]));
  }
  // The same with a hop of 0.5: stage 1 F0 [1.5,4.5] B0 [4.5,5.5] F1 [5.5,8.5] B1 [8.5,9.5];
  // stage 0 B0 [6,8] B1 [10,12].
  CHECK(simulate(a, identity_order(2), {}, 0.5) == 12);
  // p = 2, m = 3; stage 0: F = B = 2; stage 1: F = B = 1. Stage 0 is busy without a gap after
  // its first forward: makespan = 3 · 4 = 12, while Σ_s(F+B) + (m−1)·max_s(F+B) = 6 + 8 = 14.
  stage_times b(2, 3);
  b.forward = {2, 2, 2, 1, 1, 1};
  b.backward = {2, 2, 2, 1, 1, 1};
  CHECK(simulate(b, identity_order(3)) == 12);
  // Micro-batch 1 is heavy on stage 1 (F = 4, B = 4).
  stage_times c(2, 3);
  c.forward = {1, 1, 1, 1, 4, 1};
  c.backward = {1, 1, 1, 1, 4, 1};
  // order 0,1,2: s0 F0[0,1] F1[1,2]; s1 F0[1,2] B0[2,3]; s0 B0[3,4]; s1 F1[2→3? no: after B0 at 3] F1[3,7]
  // B1[7,11]; s0 F2[4,5]; s1 F2[11,12] B2[12,13]; s0 B1[11,12] B2[13,14] -> 14
  CHECK(simulate(c, std::vector<std::uint32_t>{0, 1, 2}) == 14);
  // order 1,0,2: s0 F1[0,1] F0[1,2]; s1 F1[1,5] B1[5,9]; s0 B1[9,10] F2[10,11]; s1 F0[9,10]
  // B0[10,11]; s0 B0[11,12]; s1 F2[11,12] B2[12,13]; s0 B2[13,14] -> 14
  CHECK(simulate(c, std::vector<std::uint32_t>{1, 0, 2}) == 14);
  // order 0,2,1: s1 F1[5,9] B1[9,13] after B2[4,5]; s0 B1[13,14] -> 14
  CHECK(simulate(c, std::vector<std::uint32_t>{0, 2, 1}) == 14);
}

TEST_CASE("1F1B and GPipe agree with an independent event-by-event simulation") {
  auto g = mmbal::make_rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 6));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 12));
    const stage_times t = random_times(g, p, m, trial % 2 == 0);
    std::vector<std::uint32_t> order = identity_order(m);
    mmbal::shuffle(std::span<std::uint32_t>(order), g);
    const double hop = trial % 3 == 0 ? 0.0 : mmbal::uniform_real(g, 0, 1);
    INFO("trial " << trial << " p " << p << " m " << m);
    CHECK(simulate(t, order, {}, hop) == Approx(event_simulation(t, order, false, hop)).margin(1e-9));
    CHECK(simulate(t, order, {schedule_kind::gpipe, 1}, hop) ==
          Approx(event_simulation(t, order, true, hop)).margin(1e-9));
  }
}

TEST_CASE("every recorded operation starts when its dependencies end, for all schedules") {
  auto g = mmbal::make_rng(9);
  simulation_workspace ws;  // reused across shapes
  for (int trial = 0; trial < 200; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 5));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 11));
    const auto v = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 3));
    const stage_times t = random_times(g, p, m);
    std::vector<std::uint32_t> order = identity_order(m);
    mmbal::shuffle(std::span<std::uint32_t>(order), g);
    const double hop = mmbal::uniform_real(g, 0, 0.5);
    for (const schedule s : {schedule{}, schedule{schedule_kind::interleaved, v}, schedule{schedule_kind::gpipe, 1}}) {
      INFO("trial " << trial << " " << to_spec(s) << " p " << p << " m " << m);
      std::vector<operation> ops;
      const double ms = simulate(t, order, s, hop, ws, &ops);
      check_operations(t, ops, s.kind == schedule_kind::interleaved ? v : 1, hop, ms);
      CHECK(ms >= lower_bound(t, s, hop) * (1 - 1e-12));
    }
  }
}

TEST_CASE("interleaved with one chunk is exactly 1F1B") {
  auto g = mmbal::make_rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 8));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 20));
    const stage_times t = random_times(g, p, m);
    std::vector<std::uint32_t> order = identity_order(m);
    mmbal::shuffle(std::span<std::uint32_t>(order), g);
    std::vector<operation> a, b;
    CHECK(simulate(t, order, {}, 0.25, &a) == simulate(t, order, {schedule_kind::interleaved, 1}, 0.25, &b));
    REQUIRE(a.size() == b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      CHECK(a[k].start == b[k].start);
      CHECK(a[k].end == b[k].end);
      CHECK(a[k].position == b[k].position);
    }
  }
}

TEST_CASE("interleaving shortens the warm-up with equal times") {
  // Equal times, m a multiple of p: each chunk takes (F + B)/v, the bubble shrinks by v.
  stage_times t(4, 8);
  std::fill(t.forward.begin(), t.forward.end(), 1.0);
  std::fill(t.backward.begin(), t.backward.end(), 2.0);
  const double plain = simulate(t, identity_order(8));
  const double inter = simulate(t, identity_order(8), {schedule_kind::interleaved, 2});
  CHECK(plain == 33);
  CHECK(inter < plain);
  CHECK(inter >= 8 * 3.0 + 3 * 3.0 / 2 - 1e-9);  // work + (p−1)(F+B)/v: the interleaved bubble
}

TEST_CASE("the lower bound holds for every order (brute force, m <= 7)") {
  auto g = mmbal::make_rng(21);
  int naive_violations = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 5));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, trial < 20 ? 7 : 6));
    stage_times t = random_times(g, p, m);
    // heavy encoder on the first stage, like the realistic workloads
    for (std::uint32_t j = 0; j < m; ++j) t.forward_at(0, j) *= mmbal::uniform_real(g, 1, 4);
    const double hop = trial % 2 ? 0.0 : 0.3;
    simulation_workspace ws;
    for (const schedule s : {schedule{}, schedule{schedule_kind::interleaved, 2}, schedule{schedule_kind::gpipe, 1}}) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& o : all_orders(m)) best = std::min(best, simulate(t, o, s, hop, ws));
      INFO("trial " << trial << " " << to_spec(s) << " p " << p << " m " << m);
      CHECK(lower_bound(t, s, hop) <= best * (1 + 1e-12));
      if (s.kind == schedule_kind::one_f_one_b) {
        // The invalid variant (stage work + chains through the LATER stages) exceeds the optimum.
        double naive = std::numeric_limits<double>::infinity();
        for (std::uint32_t a = 0; a < m; ++a)
          for (std::uint32_t b = 0; b < m; ++b) {
            if ((a == b) != (m == 1)) continue;
            double span = 0;
            for (std::uint32_t st = 0; st < p; ++st) {
              double w = 0, f = 0, bk = 0;
              for (std::uint32_t j = 0; j < m; ++j) w += t.forward_time(st, j) + t.backward_time(st, j);
              for (std::uint32_t r = st + 1; r < p; ++r) f += t.forward_time(r, a), bk += t.backward_time(r, b);
              span = std::max(span, f + w + bk + 2.0 * (p - 1 - st) * hop);
            }
            naive = std::min(naive, span);
          }
        naive_violations += naive > best * (1 + 1e-9);
      }
    }
  }
  CHECK(naive_violations > 0);
}

TEST_CASE("the GPipe lower bound takes one pair per micro-batch (linear in m)") {
  // It visited all m² pairs to use the m diagonal ones: 2^21 micro-batches on one stage would
  // run 2^42 iterations (found by probing mmbal.pipeline_orders, session 30). Unit times on one
  // stage: every order's makespan is 2m, and so is the bound (head 0 + the stage's work + tail 0).
  const std::uint32_t m = std::uint32_t{1} << 21;
  stage_times t(1, m);
  std::fill(t.forward.begin(), t.forward.end(), 1.0);
  std::fill(t.backward.begin(), t.backward.end(), 1.0);
  CHECK(lower_bound(t, schedule{schedule_kind::gpipe, 1}) == 2.0 * m);
}

TEST_CASE("bad input is rejected with the offending entry") {
  stage_times t(2, 3);
  t.forward_at(1, 2) = -1;
  CHECK_THROWS_WITH(simulate(t, identity_order(3)), Catch::Contains("forward[1][2]"));
  t.forward_at(1, 2) = 0;
  t.backward_at(0, 1) = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(lower_bound(t), Catch::Contains("backward[0][1]"));
  t.backward_at(0, 1) = 1;
  CHECK_THROWS_AS(simulate(t, std::vector<std::uint32_t>{0, 0, 1}), mmbal::invalid_input);
  CHECK_THROWS_AS(simulate(t, std::vector<std::uint32_t>{0, 1}), mmbal::invalid_input);
  CHECK_THROWS_AS(simulate(t, identity_order(3), {}, -1.0), mmbal::invalid_input);
  CHECK_THROWS_AS(simulate(stage_times{}, {}), mmbal::invalid_input);
  CHECK(mmbal::spec::parse_schedule("interleaved:3") == schedule{schedule_kind::interleaved, 3});
  CHECK(mmbal::spec::parse_schedule("gpipe").kind == schedule_kind::gpipe);
  CHECK(to_spec(mmbal::spec::parse_schedule("1f1b")) == "1f1b");
  CHECK_THROWS_AS(mmbal::spec::parse_schedule("interleaved:0"), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::spec::parse_schedule("interleaved:x"), mmbal::invalid_input);
  CHECK_THROWS_AS(mmbal::spec::parse_schedule("zb"), mmbal::invalid_input);
  // V beyond max_chunks (a simulation keeps O(p·m·V) state) is named with its range.
  CHECK(mmbal::spec::parse_schedule("interleaved:1024").chunks == max_chunks);
  CHECK_THROWS_WITH(mmbal::spec::parse_schedule("interleaved:1025"),
                    Catch::Contains("V = 1025 is out of range [1, 1024]"));
  CHECK_THROWS_WITH(mmbal::spec::parse_schedule("interleaved:99999999999999999999"), Catch::Contains("out of range"));
  CHECK_THROWS_AS(simulate(t, identity_order(3), schedule{schedule_kind::interleaved, max_chunks + 1}),
                  mmbal::invalid_input);
  // lower_bound took 0 and 2,000 chunks (simulate refused them), and neither checked the kind
  CHECK_THROWS_WITH(lower_bound(t, schedule{schedule_kind::interleaved, 0}), Catch::Contains("0 chunks"));
  CHECK_THROWS_WITH(lower_bound(t, schedule{schedule_kind::interleaved, 2000}), Catch::Contains("2000 chunks"));
  CHECK_THROWS_WITH(lower_bound(t, schedule{static_cast<schedule_kind>(7), 1}),
                    Catch::Contains("unknown schedule kind 7"));
  CHECK_THROWS_AS(simulate(t, identity_order(3), schedule{static_cast<schedule_kind>(7), 1}), mmbal::invalid_input);
  // Finite times and hops whose sums overflow: the makespan was inf, reported as a number.
  stage_times huge(2, 2);
  for (double& x : huge.forward) x = 1e308;
  CHECK_THROWS_WITH(simulate(huge, identity_order(2)), Catch::Contains("sum beyond a double"));
  CHECK_THROWS_WITH(lower_bound(t, {}, 1e308), Catch::Contains("hop time 1e+308"));
  CHECK_THROWS_WITH(simulate(t, identity_order(3), {}, 1e308), Catch::Contains("hop time 1e+308"));
  CHECK(std::isfinite(simulate(t, identity_order(3), {}, 1e300)));
  // Small inputs that asked for gigabytes or minutes: p = m = 128 with v = 1,024 (1.6 GB);
  // m = 20,000 on one stage (48 s in the O(p·m²) bound and DistTrain order). At the bounds
  // they run; one beyond, they are named.
  CHECK_THROWS_WITH(simulate(stage_times(128, 128), identity_order(128), schedule{schedule_kind::interleaved, 1024}),
                    Catch::Contains("128 stages x 128 micro-batches x 1024 chunks = 16777216 operations"));
  CHECK_THROWS_WITH(lower_bound(stage_times(128, 128), schedule{schedule_kind::interleaved, 1024}),
                    Catch::Contains("(at most 4194304)"));
  CHECK(simulate(stage_times(64, 64), identity_order(64), schedule{schedule_kind::interleaved, 1024}) == 0);
  CHECK_THROWS_WITH(lower_bound(stage_times(1, 8193)), Catch::Contains("1 stages x 8193^2 micro-batches exceed"));
  CHECK_THROWS_WITH(mmbal::pipeline::disttrain_order(stage_times(1, 8193)), Catch::Contains("disttrain_order"));
  CHECK_THROWS_WITH(lower_bound(stage_times(4, 4097)), Catch::Contains("4 stages x 4097^2"));
  CHECK(lower_bound(stage_times(4, 4096)) == 0);
  CHECK(lower_bound(stage_times(1, 20000), schedule{schedule_kind::gpipe, 1}) == 0);  // O(p·m) for GPipe
  CHECK(simulate(stage_times(1, 20000), identity_order(20000)) == 0);                 // O(p·m)
}

TEST_CASE("simulate_suffix equals a full simulation for every first changed position") {
  auto g = mmbal::make_rng(17);
  for (int trial = 0; trial < 150; ++trial) {
    const auto p = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 6));
    const auto m = static_cast<std::uint32_t>(mmbal::uniform_int(g, 1, 14));
    const stage_times t = random_times(g, p, m);
    const double hop = trial % 2 ? 0.0 : 0.2;
    for (const schedule s : {schedule{}, schedule{schedule_kind::gpipe, 1}, schedule{schedule_kind::interleaved, 2}}) {
      std::vector<std::uint32_t> base = identity_order(m);
      mmbal::shuffle(std::span<std::uint32_t>(base), g);
      simulation_workspace ws;
      simulate_unchecked(t, base, s, hop, ws, nullptr, std::numeric_limits<double>::infinity());
      keep_as_base(ws);
      // several candidates in a row against the same base, as the search evaluates them
      for (int c = 0; c < 6; ++c) {
        const auto i = static_cast<std::uint32_t>(mmbal::uniform_below(g, m));
        std::vector<std::uint32_t> cand = base;
        std::shuffle(cand.begin() + i, cand.end(), g);
        INFO("trial " << trial << " " << to_spec(s) << " p " << p << " m " << m << " i " << i);
        const double give_up = c % 3 == 0 ? 0.0 : std::numeric_limits<double>::infinity();
        const double inc = simulate_suffix(t, cand, s, hop, ws, i, give_up);
        if (give_up == 0.0) {
          CHECK(inc == std::numeric_limits<double>::infinity());
          continue;
        }
        CHECK(inc == simulate(t, cand, s, hop));
      }
    }
  }
}
