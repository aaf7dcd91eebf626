/// @file
/// `mmbal._core`: the pybind11 module under the pure-Python package `mmbal` (python/mmbal/).
///
/// Conventions for every function here:
/// - integer arrays arrive as anything `numpy.asarray` accepts (lists, NumPy arrays, CPU torch
///   tensors); C-contiguous arrays whose element type already has the C++ width (int32/uint32
///   for lengths and ranks, int64/uint64 for sizes and ids) are read in place, others are
///   converted once. Every value is range-checked before use (never wrapped by a cast); a bad
///   value raises `mmbal.Error` (the translation of `mmbal::invalid_input`) naming the argument,
///   the index and the value;
/// - results are NumPy arrays that own the C++ buffer they were computed into (no copy);
/// - the GIL is released while C++ computes (arguments are converted and checked first).

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mmbal/balance/spec.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/cost/spec.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/rearrangement.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using mmbal::detail::throw_invalid;

constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t i64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// ------------------------------------------------------------------ arrays in

/// `obj` as a 1-D C-contiguous NumPy integer array (an empty sequence of any dtype is accepted as
/// an empty array). Throws `invalid_input` naming `name` on another shape or a non-integer dtype.
py::array integer_array(py::handle obj, const char* name) {
  py::array a;
  if (py::isinstance<py::array>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    try {
      a = py::module_::import("numpy").attr("asarray")(obj);
    } catch (py::error_already_set& e) {
      throw_invalid(name, ": cannot be read as an integer array (", e.what(), ")");
    }
  }
  if (a.ndim() != 1) {
    std::string shape = "(";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) shape += (d ? ", " : "") + std::to_string(a.shape(d));
    throw_invalid(name, ": expected a 1-D array, got shape ", shape, a.ndim() == 1 ? ",)" : ")");
  }
  if (a.size() == 0) return py::array_t<std::int64_t>(0);
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw_invalid(name, ": expected integers, got dtype ", std::string(py::str(a.dtype())));
  if (!(a.flags() & py::array::c_style)) a = py::module_::import("numpy").attr("ascontiguousarray")(a);
  return a;
}

/// Calls `f(const T* data)` with the element type of the integer array `a`.
template <class F>
void visit_integers(const py::array& a, F&& f) {
  const void* p = a.data();
  const bool is_signed = a.dtype().kind() == 'i';
  switch (a.itemsize()) {
    case 1:
      return is_signed ? f(static_cast<const std::int8_t*>(p)) : f(static_cast<const std::uint8_t*>(p));
    case 2:
      return is_signed ? f(static_cast<const std::int16_t*>(p)) : f(static_cast<const std::uint16_t*>(p));
    case 4:
      return is_signed ? f(static_cast<const std::int32_t*>(p)) : f(static_cast<const std::uint32_t*>(p));
    case 8:
      return is_signed ? f(static_cast<const std::int64_t*>(p)) : f(static_cast<const std::uint64_t*>(p));
    default:
      throw_invalid("integer array of ", a.itemsize(), "-byte elements is not supported");
  }
}

/// A read-only view of an integer argument as unsigned `T` (uint32 or uint64), every value
/// checked to lie in [0, hi]. Read in place when the element width is T's (signed or
/// unsigned: a non-negative value has the same representation); otherwise converted into
/// `storage`. The view is valid while `array` lives.
template <class T>
struct unsigned_view {
  py::array array;
  std::vector<T> storage;
  std::span<const T> values;

  unsigned_view(py::handle obj, const char* name, std::uint64_t hi) : array(integer_array(obj, name)) {
    const auto n = static_cast<std::size_t>(array.size());
    visit_integers(array, [&](const auto* data) {
      using E = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
      for (std::size_t i = 0; i < n; ++i)
        if (std::cmp_less(data[i], 0) || std::cmp_greater(data[i], hi))
          throw_invalid(name, "[", i, "] = ", +data[i], " is out of range [0, ", hi, "]");
      if constexpr (sizeof(E) == sizeof(T)) {
        values = std::span<const T>(reinterpret_cast<const T*>(data), n);
      } else {
        storage.assign(data, data + n);
        values = storage;
      }
    });
  }
  [[nodiscard]] std::size_t size() const noexcept { return values.size(); }
};

using lengths_view = unsigned_view<std::uint32_t>;
using u64_view = unsigned_view<std::uint64_t>;

/// A count of ranks (or any positive 32-bit count) from a Python int: 1 ≤ value ≤ 2^32 − 1.
mmbal::rank_t positive_count(py::handle obj, const char* name) {
  if (!py::isinstance<py::int_>(obj) || py::isinstance<py::bool_>(obj))
    throw_invalid(name, ": expected an int, got ", std::string(py::str(obj)), " (",
                  std::string(py::str(obj.get_type().attr("__name__"))), ")");
  const auto v = obj.cast<py::int_>();
  if (py::int_(0).attr("__ge__")(v).cast<bool>() || v.attr("__gt__")(py::int_(u32_max)).cast<bool>())
    throw_invalid(name, " = ", std::string(py::str(obj)), " is out of range [1, ", u32_max, "]");
  return v.cast<mmbal::rank_t>();
}

/// A rank index from a Python int: 0 ≤ value < ranks.
mmbal::rank_t rank_index(py::handle obj, const char* name, mmbal::rank_t ranks) {
  if (!py::isinstance<py::int_>(obj) || py::isinstance<py::bool_>(obj))
    throw_invalid(name, ": expected an int, got ", std::string(py::str(obj)));
  const auto v = obj.cast<py::int_>();
  if (py::int_(0).attr("__gt__")(v).cast<bool>() || !v.attr("__lt__")(py::int_(ranks)).cast<bool>())
    throw_invalid(name, " = ", std::string(py::str(obj)), " is out of range [0, ", ranks, ")");
  return v.cast<mmbal::rank_t>();
}

// ------------------------------------------------------------------ arrays out

/// A NumPy array owning `v`'s buffer (moved to the heap; a capsule frees it with the array).
template <class T>
py::array_t<T> to_numpy(std::vector<T>&& v) {
  if (v.empty()) return py::array_t<T>(0);
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(), owner);
}

template <class T>
py::list to_list(const std::vector<T>& v) {
  py::list out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = py::int_(v[i]);
  return out;
}

// ------------------------------------------------------------------ assignments

/// An assignment from its `rank`/`slot` arrays over `ranks` ranks (validated).
mmbal::assignment to_assignment(py::handle rank, py::handle slot, mmbal::rank_t ranks, const char* what) {
  const std::string rank_name = std::string(what) + ".rank", slot_name = std::string(what) + ".slot";
  const unsigned_view<std::uint32_t> r(rank, rank_name.c_str(), ranks - std::uint64_t{1});
  const unsigned_view<std::uint32_t> s(slot, slot_name.c_str(), u32_max);
  if (r.size() != s.size()) throw_invalid(what, ": rank has ", r.size(), " entries but slot has ", s.size());
  mmbal::checked_count(r.size(), "items");
  mmbal::assignment a{ranks, std::vector<mmbal::location>(r.size())};
  for (std::size_t i = 0; i < r.size(); ++i) a.where[i] = mmbal::location{r.values[i], s.values[i]};
  a.validate();
  return a;
}

/// `a`'s rank and slot per item as two int32 arrays.
py::tuple from_assignment(const mmbal::assignment& a) {
  std::vector<std::int32_t> rank(a.size()), slot(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    rank[i] = static_cast<std::int32_t>(a.where[i].rank);
    slot[i] = static_cast<std::int32_t>(a.where[i].slot);
  }
  return py::make_tuple(to_numpy(std::move(rank)), to_numpy(std::move(slot)));
}

// ------------------------------------------------------------------ balance

mmbal::balance::count_cap to_count_cap(py::handle obj) {
  using mode = mmbal::balance::count_cap::mode;
  if (obj.is_none()) return {};
  if (py::isinstance<py::str>(obj)) {
    if (obj.cast<std::string>() == "equal") return {mode::equal, 0};
    throw_invalid("count_cap = '", obj.cast<std::string>(), "' is neither 'equal' nor a positive int");
  }
  return {mode::fixed, positive_count(obj, "count_cap")};
}

std::optional<double> to_capacity(py::handle obj) {
  if (obj.is_none()) return std::nullopt;
  double c = 0;
  try {
    c = obj.cast<double>();
  } catch (const py::cast_error&) {
    throw_invalid("capacity: expected a number, got ", std::string(py::str(obj)));
  }
  if (!std::isfinite(c) || c < 0) throw_invalid("capacity = ", c, " must be a finite number >= 0");
  return c;
}

/// Everything `balance` needs, converted and checked with the GIL held.
struct balance_call {
  lengths_view lengths;
  mmbal::balance::algorithm_spec algorithm;
  mmbal::cost::any_cost cost;
  std::optional<unsigned_view<std::uint32_t>> origin;
  std::optional<u64_view> groups, bytes;
  mmbal::balance::problem problem;

  balance_call(py::handle lengths_in, py::handle ranks_in, const std::string& algorithm_spec,
               const std::string& cost_spec, py::handle origin_in, py::handle count_cap, py::handle capacity,
               py::handle groups_in, py::handle bytes_in, py::handle ranks_per_node)
      : lengths(lengths_in, "lengths", u32_max),
        algorithm(mmbal::balance::parse_algorithm(algorithm_spec)),
        cost(mmbal::cost::parse_cost(cost_spec)) {
    problem.weights = lengths.values;
    problem.bins = positive_count(ranks_in, "ranks");
    if (!origin_in.is_none()) {
      origin.emplace(origin_in, "origin", problem.bins - std::uint64_t{1});
      if (origin->size() != lengths.size())
        throw_invalid("origin has ", origin->size(), " entries but lengths has ", lengths.size());
      problem.origin = origin->values;
    } else if (algorithm.base == mmbal::balance::algorithm_kind::migrate) {
      throw_invalid("algorithm '", algorithm_spec, "' needs origin= (the rank that holds each item now)");
    }
    if (!groups_in.is_none()) {
      groups.emplace(groups_in, "groups", std::numeric_limits<std::uint64_t>::max());
      if (groups->size() != lengths.size())
        throw_invalid("groups has ", groups->size(), " entries but lengths has ", lengths.size());
      problem.limits.groups = groups->values;
    }
    if (!bytes_in.is_none()) {
      bytes.emplace(bytes_in, "bytes", std::numeric_limits<std::uint64_t>::max());
      if (bytes->size() != lengths.size())
        throw_invalid("bytes has ", bytes->size(), " entries but lengths has ", lengths.size());
      problem.bytes = bytes->values;
    }
    problem.limits.counts = to_count_cap(count_cap);
    problem.limits.capacity = to_capacity(capacity);
    problem.ranks_per_node = ranks_per_node.is_none() ? 0 : rank_index(ranks_per_node, "ranks_per_node", u32_max);
  }
};

struct balance_result {
  mmbal::assignment placement;
  std::vector<double> loads;
  double lower_bound = 0;
};

balance_result solve(const balance_call& c) {
  balance_result out;
  out.placement = mmbal::balance::solve(c.algorithm, c.cost, c.problem);
  std::visit(
      [&](const auto& cost) {
        out.loads = mmbal::bin_loads(out.placement, c.problem.weights, cost);
        out.lower_bound = c.problem.limits.counts.kind == mmbal::balance::count_cap::mode::equal
                              ? mmbal::equal_count_lower_bound(c.problem.weights, c.problem.bins, cost)
                              : mmbal::lower_bound(c.problem.weights, c.problem.bins, cost);
      },
      c.cost);
  for (std::size_t b = 0; b < out.loads.size(); ++b)
    if (std::isnan(out.loads[b])) throw_invalid("balance: the cost of rank ", b, " is NaN");
  return out;
}

py::tuple balance(py::handle lengths, py::handle ranks, const std::string& algorithm, const std::string& cost,
                  py::handle origin, py::handle count_cap, py::handle capacity, py::handle groups, py::handle bytes,
                  py::handle ranks_per_node) {
  const balance_call call(lengths, ranks, algorithm, cost, origin, count_cap, capacity, groups, bytes, ranks_per_node);
  balance_result r;
  {
    py::gil_scoped_release unlocked;
    r = solve(call);
  }
  py::tuple ranks_slots = from_assignment(r.placement);
  return py::make_tuple(ranks_slots[0], ranks_slots[1], to_numpy(std::move(r.loads)), r.lower_bound);
}

/// Seconds per call of the C++ work of `balance` alone (solve + loads + lower bound) on
/// already converted arguments, best of `repeats` — the baseline of bench/python/bench_core.py.
double time_balance(py::handle lengths, py::handle ranks, const std::string& algorithm, const std::string& cost,
                    int repeats) {
  const py::none none;
  const balance_call call(lengths, ranks, algorithm, cost, none, none, none, none, none, none);
  py::gil_scoped_release unlocked;
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < std::max(repeats, 1); ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const balance_result r = solve(call);
    const auto t1 = std::chrono::steady_clock::now();
    if (r.placement.size() != call.lengths.size()) throw_invalid("time_balance: lost items");
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

py::array_t<double> assignment_loads(py::handle rank, py::handle slot, py::handle ranks, py::handle lengths,
                                     const std::string& cost_spec) {
  const mmbal::assignment a = to_assignment(rank, slot, positive_count(ranks, "ranks"), "assignment");
  const lengths_view w(lengths, "lengths", u32_max);
  if (w.size() != a.size()) throw_invalid("lengths has ", w.size(), " entries but the assignment has ", a.size());
  const mmbal::cost::any_cost cost = mmbal::cost::parse_cost(cost_spec);
  std::vector<double> loads;
  {
    py::gil_scoped_release unlocked;
    loads = std::visit([&](const auto& c) { return mmbal::bin_loads(a, w.values, c); }, cost);
  }
  return to_numpy(std::move(loads));
}

// ------------------------------------------------------------------ all-to-all plans

/// What a plan is derived from: the rearrangement and the item sizes in rows. Shared by a plan
/// and its inverse.
struct plan_source {
  mmbal::rearrangement moves;
  std::vector<std::uint64_t> sizes;
};

/// One rank's all-to-all plan in the form a tensor exchange uses (see the `AllToAllPlan`
/// docstring below).
struct py_plan {
  mmbal::rank_t rank = 0;
  mmbal::rank_t ranks = 0;
  py::list send_splits, recv_splits;
  std::uint64_t source_rows = 0, dest_rows = 0;
  py::array_t<std::int64_t> send_items, recv_items, pack_index, unpack_index;
  std::uint64_t fingerprint = 0;
  std::shared_ptr<const plan_source> source;

  [[nodiscard]] py_plan inverse() const;
};

struct plan_arrays {
  mmbal::alltoall_plan plan;
  std::vector<std::int64_t> send_items, recv_items, pack_index, unpack_index;
  std::uint64_t fingerprint = 0;
};

plan_arrays compute_plan(const plan_source& s, mmbal::rank_t rank) {
  plan_arrays out;
  out.plan = mmbal::make_alltoall_plan(s.moves, s.sizes, rank);
  const mmbal::alltoall_plan& p = out.plan;
  if (p.input_bytes > i64_max || p.output_bytes > i64_max)
    throw_invalid("alltoall_plan: rank ", rank, " would hold more than 2^63 - 1 rows");
  out.send_items.assign(p.pack_slots.begin(), p.pack_slots.end());
  out.recv_items.assign(p.unpack_slots.begin(), p.unpack_slots.end());
  out.pack_index.reserve(p.send_bytes);
  for (std::size_t k = 0; k < p.pack_sizes.size(); ++k)
    for (std::uint64_t j = 0; j < p.pack_sizes[k]; ++j)
      out.pack_index.push_back(static_cast<std::int64_t>(p.pack_offsets[k] + j));
  out.unpack_index.resize(p.output_bytes);
  std::int64_t arrived = 0;  // row of the receive buffer
  for (std::size_t k = 0; k < p.unpack_sizes.size(); ++k)
    for (std::uint64_t j = 0; j < p.unpack_sizes[k]; ++j) out.unpack_index[p.unpack_offsets[k] + j] = arrived++;
  out.fingerprint = mmbal::fingerprint(s.moves, s.sizes);
  return out;
}

py_plan make_py_plan(std::shared_ptr<const plan_source> source, mmbal::rank_t rank) {
  plan_arrays a;
  {
    py::gil_scoped_release unlocked;
    a = compute_plan(*source, rank);
  }
  py_plan out;
  out.rank = rank;
  out.ranks = a.plan.ranks;
  out.send_splits = to_list(a.plan.send_counts);
  out.recv_splits = to_list(a.plan.recv_counts);
  out.source_rows = a.plan.input_bytes;
  out.dest_rows = a.plan.output_bytes;
  out.send_items = to_numpy(std::move(a.send_items));
  out.recv_items = to_numpy(std::move(a.recv_items));
  out.pack_index = to_numpy(std::move(a.pack_index));
  out.unpack_index = to_numpy(std::move(a.unpack_index));
  out.fingerprint = a.fingerprint;
  out.source = std::move(source);
  return out;
}

py_plan py_plan::inverse() const {
  auto back = std::make_shared<plan_source>(plan_source{source->moves.inverse(), source->sizes});
  return make_py_plan(std::move(back), rank);
}

u64_view item_sizes(py::handle sizes, std::size_t items) {
  u64_view s(sizes, "sizes", i64_max);
  if (s.size() != items) throw_invalid("sizes has ", s.size(), " entries but there are ", items, " items");
  return s;
}

py_plan alltoall_plan(py::handle source_rank, py::handle target_rank, py::handle target_slot, py::handle target_ranks,
                      py::handle sizes, py::handle rank) {
  const mmbal::rank_t ranks = positive_count(target_ranks, "target.ranks");
  const mmbal::assignment target = to_assignment(target_rank, target_slot, ranks, "target");
  const unsigned_view<std::uint32_t> origin(source_rank, "source_rank", ranks - std::uint64_t{1});
  if (origin.size() != target.size())
    throw_invalid("source_rank has ", origin.size(), " entries but target has ", target.size(), " items");
  const u64_view s = item_sizes(sizes, target.size());
  const mmbal::rank_t me = rank_index(rank, "rank", ranks);
  auto source = std::make_shared<plan_source>(
      plan_source{mmbal::rearrangement::from_origin(origin.values, target), {s.values.begin(), s.values.end()}});
  return make_py_plan(std::move(source), me);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "mmbal._core: the C++ core of the mmbal Python package (use the package `mmbal`, not this module).";

  static py::exception<mmbal::invalid_input> error(m, "Error", PyExc_ValueError);
  error.attr("__doc__") = "Bad input to mmbal (a ValueError): the message names the argument and the value.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mmbal::invalid_input& e) {
      error(e.what());
    }
  });

  m.def("balance", &balance, py::arg("lengths"), py::arg("ranks"), py::arg("algorithm"), py::arg("cost"),
        py::arg("origin"), py::arg("count_cap"), py::arg("capacity"), py::arg("groups"), py::arg("bytes"),
        py::arg("ranks_per_node"),
        "Balances items of `lengths` over `ranks` ranks with `balance::solve`; returns (rank, slot, loads, "
        "lower_bound). See mmbal.balance.");
  m.def("time_balance", &time_balance, py::arg("lengths"), py::arg("ranks"), py::arg("algorithm"), py::arg("cost"),
        py::arg("repeats"), "Best-of-`repeats` seconds of the C++ work of balance (benchmark baseline).");
  m.def(
      "validate_assignment",
      [](py::handle rank, py::handle slot, py::handle ranks) {
        (void)to_assignment(rank, slot, positive_count(ranks, "ranks"), "assignment");
      },
      py::arg("rank"), py::arg("slot"), py::arg("ranks"),
      "Raises mmbal.Error unless every rank < ranks and each rank's slots are 0..k-1, each once.");
  m.def("assignment_loads", &assignment_loads, py::arg("rank"), py::arg("slot"), py::arg("ranks"), py::arg("lengths"),
        py::arg("cost"), "Per-rank cost of an assignment (items folded in slot order).");

  py::class_<py_plan>(m, "AllToAllPlan",
                      R"doc(One rank's share of the all-to-all that moves items between two placements.

Rows: every size is in rows of dim 0 of the tensors exchanged.
- input (source_rows rows): this rank's items now, back to back in SOURCE slot order;
- send buffer = input[pack_index]: the items for peer 0, then peer 1, ...; to one peer in
  ascending DESTINATION slot; send_splits[p] rows for peer p;
- receive buffer: what arrives from peer 0, then peer 1, ... (recv_splits[q] rows from peer q),
  from one peer in ascending destination slot (the order that peer packs);
- output = recv_buffer[unpack_index] (dest_rows rows): this rank's items in DESTINATION slot order.
Items that stay on this rank go through the buffers as a self send.
fingerprint is equal on every rank for the same global plan (the rearrangement and the sizes).)doc")
      .def_readonly("rank", &py_plan::rank, "The rank this plan is for.")
      .def_readonly("ranks", &py_plan::ranks, "Number of ranks.")
      .def_readonly("send_splits", &py_plan::send_splits, "Rows sent to each peer (list[int], one per rank).")
      .def_readonly("recv_splits", &py_plan::recv_splits, "Rows received from each peer (list[int], one per rank).")
      .def_readonly("source_rows", &py_plan::source_rows, "Rows of the local input (= sum(send_splits)).")
      .def_readonly("dest_rows", &py_plan::dest_rows, "Rows of the local output (= sum(recv_splits)).")
      .def_readonly("send_items", &py_plan::send_items, "int64: source slot of each item in pack order.")
      .def_readonly("recv_items", &py_plan::recv_items, "int64: destination slot of each item in arrival order.")
      .def_readonly("pack_index", &py_plan::pack_index, "int64, source_rows entries: send_buffer = x[pack_index].")
      .def_readonly("unpack_index", &py_plan::unpack_index,
                    "int64, dest_rows entries: output = recv_buffer[unpack_index] (destination slot order).")
      .def_readonly("fingerprint", &py_plan::fingerprint,
                    "64-bit hash of the global plan (every item's locations and size); equal on every rank.")
      .def("inverse", &py_plan::inverse,
           "The plan (for the same rank) that moves every item back: its input is this plan's output.")
      .def("__repr__", [](const py_plan& p) {
        return mmbal::detail::concat("AllToAllPlan(rank=", p.rank, ", ranks=", p.ranks, ", source_rows=", p.source_rows,
                                     ", dest_rows=", p.dest_rows, ", fingerprint=", p.fingerprint, ")");
      });
  m.def("alltoall_plan", &alltoall_plan, py::arg("source_rank"), py::arg("target_rank"), py::arg("target_slot"),
        py::arg("target_ranks"), py::arg("sizes"), py::arg("rank"),
        "The AllToAllPlan of `rank` moving item i from rank source_rank[i] (slots in ascending i) to "
        "(target_rank[i], target_slot[i]); sizes[i] rows each.");
}
