/// @file
/// `mmbal._core`: the pybind11 module under the pure-Python package `mmbal` (python/mmbal/).
///
/// Conventions for every function here:
/// - integer arrays arrive as anything `numpy.asarray` accepts (lists, NumPy arrays, CPU torch
///   tensors); every element is read once, range-checked and copied (`unsigned_view`: never
///   read in place, since the C++ work runs without the GIL), never wrapped by a cast; a bad
///   value raises `mmbal.Error` (the translation of `mmbal::invalid_input`) naming the argument,
///   the index and the value;
/// - results are NumPy arrays that own the C++ buffer they were computed into (no copy);
/// - the GIL is released while C++ computes (arguments are converted and checked first);
/// - text arguments go through `text_arg`, flags through `as_flag`, ints through `as_index`.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "balanced_partitions.hpp"

#include <mmbal/context/distribute.hpp>
#include <mmbal/core/error.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/fit.hpp>
#include <mmbal/cost/metrics.hpp>
#include <mmbal/mask/bitfield.hpp>
#include <mmbal/mask/block_mask.hpp>
#include <mmbal/mask/dense.hpp>
#include <mmbal/mask/workloads.hpp>
#include <mmbal/orchestrate/orchestrator.hpp>
#include <mmbal/orchestrate/policy.hpp>
#include <mmbal/pipeline/pipeline.hpp>
#include <mmbal/rearrange/alltoall_plan.hpp>
#include <mmbal/rearrange/rearrangement.hpp>
#include <mmbal/sampling/isf.hpp>
#include <mmbal/spec/spec.hpp>
#include <mmbal/workload/sample.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

using mmbal::detail::throw_invalid;

constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t i64_max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// ------------------------------------------------------------------ text in

/// `obj` as UTF-8 text. Throws `invalid_input` naming `name` when `obj` is not a str, cannot be
/// encoded (a lone surrogate such as '\ud800': pybind11 raised a bare RuntimeError) or holds a
/// NUL (the C++ side and its messages would cut the text there).
std::string text_arg(py::handle obj, std::string_view name) {
  if (!py::isinstance<py::str>(obj)) throw_invalid(name, ": expected a str, got ", std::string(py::repr(obj)));
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    throw_invalid(name, " = ", std::string(py::repr(obj)), " cannot be encoded as UTF-8");
  }
  std::string text(data, static_cast<std::size_t>(size));
  if (text.find('\0') != std::string::npos)
    throw_invalid(name, " = ", std::string(py::repr(obj)), " holds a NUL character");
  return text;
}

// ------------------------------------------------------------------ arrays in

/// A list or tuple that NumPy read as floats or objects although it may hold only ints (one
/// beyond int64 makes float64 or object): read element by element as uint64, naming the first
/// element that is not an int or lies outside [0, 2^64 - 1] (every integer argument is
/// non-negative), instead of the dtype NumPy chose.
py::array python_ints(py::handle obj, const char* name) {
  const auto seq = py::reinterpret_borrow<py::sequence>(obj);
  const std::size_t n = py::len(seq);
  std::vector<std::uint64_t> values(n);
  for (std::size_t i = 0; i < n; ++i) {
    const py::object x = seq[i];
    if (!PyLong_Check(x.ptr()) || py::isinstance<py::bool_>(x))
      throw_invalid(name, "[", i, "] = ", std::string(py::repr(x)), " is not an int");
    values[i] = PyLong_AsUnsignedLongLong(x.ptr());
    if (PyErr_Occurred() != nullptr) {
      PyErr_Clear();
      throw_invalid(name, "[", i, "] = ", std::string(py::repr(x)), " is out of range [0, 2^64 - 1]");
    }
  }
  return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(n), values.data());
}

/// `obj` as a 1-D C-contiguous NumPy integer array (an empty sequence of any dtype is accepted as
/// an empty array). Throws `invalid_input` naming `name` on another shape or a non-integer dtype.
py::array integer_array(py::handle obj, const char* name) {
  py::array a;
  static const py::handle masked_array = py::object(py::module_::import("numpy.ma").attr("MaskedArray")).release();
  if (py::isinstance(obj, masked_array))  // np.asarray would drop the mask and use the hidden values
    throw_invalid(name, ": a masked array (numpy.ma) is not supported; pass its .compressed() or .filled() values");
  if (py::isinstance<py::array>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    try {
      a = py::module_::import("numpy").attr("asarray")(obj);
    } catch (py::error_already_set& e) {
      throw_invalid(name, ": cannot be read as an integer array (", std::string(py::str(e.value())), ")");
    }
  }
  if (a.ndim() != 1) {
    std::string shape = "(";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) shape += (d ? ", " : "") + std::to_string(a.shape(d));
    throw_invalid(name, ": expected a 1-D array, got shape ", shape, a.ndim() == 1 ? ",)" : ")");
  }
  if (a.size() == 0) return py::array_t<std::int64_t>(0);
  char kind = a.dtype().kind();
  const bool sequence = py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj);
  if ((kind == 'f' || kind == 'O') && sequence) {
    a = python_ints(obj, name);
    kind = 'u';
  }
  if (kind == 'i' && sequence) {  // NumPy reads [3, True, 2] as [3, 1, 2]: a bool is not a length
    const auto seq = py::reinterpret_borrow<py::sequence>(obj);
    for (std::size_t i = 0; i < py::len(seq); ++i)
      if (PyBool_Check(PySequence_Fast_GET_ITEM(seq.ptr(), static_cast<Py_ssize_t>(i))))
        throw_invalid(name, "[", i, "] = ", std::string(py::repr(seq[i])), " is not an int");
  }
  if (kind != 'i' && kind != 'u')
    throw_invalid(name, ": expected integers, got dtype ", std::string(py::str(a.dtype())));
  if (!a.dtype().attr("isnative").cast<bool>())  // e.g. big-endian '>i8': read as native values
    a = a.attr("astype")(a.dtype().attr("newbyteorder")("="));
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

/// An integer argument as unsigned `T` (uint32 or uint64), every value checked to lie in
/// [0, hi]. Each element is read once, checked and copied: the C++ code runs with the GIL
/// released, and another Python thread may rewrite the caller's array meanwhile, so a value
/// read in place could differ from the value checked, or change under a sort (a segfault in
/// `migrate` through `origin`, session 28; heap corruption in `balance` through `groups` and
/// wrong sums in `distribute_tokens`, session 30). The check reads every element anyway, so
/// the copy only adds the stores (bench/RESULTS.md "Session 30"). Not copyable (`values`
/// points into `storage`); moves keep the buffer.
template <class T>
struct unsigned_view {
  std::vector<T> storage;
  std::span<const T> values;

  unsigned_view(py::handle obj, const char* name, std::uint64_t hi) {
    const py::array array = integer_array(obj, name);
    const auto n = static_cast<std::size_t>(array.size());
    storage.resize(n);
    visit_integers(array, [&](const auto* data) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto x = data[i];  // one read: the value checked is the value kept
        if (std::cmp_less(x, 0) || std::cmp_greater(x, hi))
          throw_invalid(name, "[", i, "] = ", +x, " is out of range [0, ", hi, "]");
        storage[i] = static_cast<T>(x);
      }
    });
    values = storage;
  }
  unsigned_view(const unsigned_view&) = delete;
  unsigned_view& operator=(const unsigned_view&) = delete;
  unsigned_view(unsigned_view&&) noexcept = default;
  unsigned_view& operator=(unsigned_view&&) noexcept = default;
  [[nodiscard]] std::size_t size() const noexcept { return values.size(); }
};

using lengths_view = unsigned_view<std::uint32_t>;
using u64_view = unsigned_view<std::uint64_t>;

/// Whether `obj` is a boolean scalar: Python's, NumPy's `bool_`, or a 0-d bool array or tensor
/// (all of which `operator.index` would take as 0 or 1).
bool is_boolean(py::handle obj) {
  if (py::isinstance<py::bool_>(obj)) return true;
  if (!py::hasattr(obj, "dtype")) return false;
  const std::string dtype = py::str(obj.attr("dtype"));
  return dtype == "bool" || dtype == "torch.bool";
}

/// `obj` as a Python int through `operator.index` (so NumPy integers work; floats, strings and
/// bools do not), named `name` in the error.
py::int_ as_index(py::handle obj, const char* name) {
  if (!is_boolean(obj)) {
    PyObject* v = PyNumber_Index(obj.ptr());
    if (v != nullptr) return py::reinterpret_steal<py::int_>(v);
    PyErr_Clear();
  }
  throw_invalid(name, ": expected an int, got ", std::string(py::repr(obj)), " (",
                std::string(py::str(obj.get_type().attr("__name__"))), ")");
}

/// A flag from `obj`: Python's or NumPy's bool, or the int 0 or 1 (verl's callers pass either),
/// else `invalid_input` naming `name` (a string such as "no" would otherwise count as true).
bool as_flag(py::handle obj, const char* name) {
  if (py::isinstance<py::int_>(obj) && !py::isinstance<py::bool_>(obj)) {
    const py::int_ v = py::reinterpret_borrow<py::int_>(obj);
    if (v.equal(py::int_(0)) || v.equal(py::int_(1))) return v.equal(py::int_(1));
  } else if (is_boolean(obj) && !(py::hasattr(obj, "ndim") && obj.attr("ndim").cast<py::ssize_t>() != 0)) {
    return PyObject_IsTrue(obj.ptr()) == 1;
  }
  throw_invalid(name, ": expected True or False, got ", std::string(py::repr(obj)));
}

/// A real number from `obj`: a Python int or float, or a NumPy / torch integer or floating
/// scalar (0-d); not a bool, a complex, an array of more than one dimension-less value or a
/// string. Else `invalid_input` naming `name` (a bare PyNumber_Check let complex numbers,
/// one-element arrays and ints beyond a double through, or raised OverflowError).
double number_arg(py::handle obj, const char* name) {
  bool real = PyLong_Check(obj.ptr()) || PyFloat_Check(obj.ptr());
  if (!real && py::hasattr(obj, "dtype") && py::hasattr(obj, "ndim")) {
    const std::string dtype = py::str(obj.attr("dtype"));
    const bool numeric = dtype.find("int") != std::string::npos || dtype.find("float") != std::string::npos;
    real = numeric && obj.attr("ndim").cast<py::ssize_t>() == 0;
  }
  if (!real || is_boolean(obj)) throw_invalid(name, ": expected a real number, got ", std::string(py::repr(obj)));
  const double v = PyFloat_AsDouble(obj.ptr());
  if (v == -1.0 && PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    throw_invalid(name, " = ", std::string(py::repr(obj)), " is beyond a double");
  }
  return v;
}

/// An int from `obj` in [lo, hi], else `invalid_input` naming `name` and the value.
std::uint64_t int_in_range(py::handle obj, const char* name, std::uint64_t lo, std::uint64_t hi) {
  const py::int_ v = as_index(obj, name);
  if (v.attr("__lt__")(py::int_(lo)).cast<bool>() || v.attr("__gt__")(py::int_(hi)).cast<bool>())
    throw_invalid(name, " = ", std::string(py::str(py::handle(v))), " is out of range [", lo, ", ", hi, "]");
  return v.cast<std::uint64_t>();
}

/// A positive 32-bit count (a count cap, a quota, a block size) from a Python int: 1 ≤ value ≤ 2^32 − 1.
mmbal::rank_t positive_count(py::handle obj, const char* name) {
  return static_cast<mmbal::rank_t>(int_in_range(obj, name, 1, u32_max));
}

/// A count of ranks from a Python int: 1 ≤ value ≤ `mmbal::max_ranks` (2^24).
mmbal::rank_t rank_count(py::handle obj, const char* name) {
  return static_cast<mmbal::rank_t>(int_in_range(obj, name, 1, mmbal::max_ranks));
}

/// A rank index from a Python int: 0 ≤ value < ranks.
mmbal::rank_t rank_index(py::handle obj, const char* name, mmbal::rank_t ranks) {
  const py::int_ v = as_index(obj, name);
  if (v.attr("__lt__")(py::int_(0)).cast<bool>() || !v.attr("__lt__")(py::int_(ranks)).cast<bool>())
    throw_invalid(name, " = ", std::string(py::str(py::handle(v))), " is out of range [0, ", ranks, ")");
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

/// `a`, no longer writeable: an array a plan or an assignment holds, which an in-place edit
/// (`idx += offset`) would corrupt behind the checks that made it.
template <class A>
A read_only(A a) {
  a.attr("setflags")(py::arg("write") = false);
  return a;
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
    const std::string text = text_arg(obj, "count_cap");
    if (text == "equal") return {mode::equal, 0};
    throw_invalid("count_cap = '", text, "' is neither 'equal' nor a positive int");
  }
  return {mode::fixed, positive_count(obj, "count_cap")};
}

std::optional<double> to_capacity(py::handle obj) {
  if (obj.is_none()) return std::nullopt;
  double c = 0;
  const bool scalar = !is_boolean(obj) && (!py::hasattr(obj, "ndim") || obj.attr("ndim").cast<py::ssize_t>() == 0);
  try {
    if (!scalar) throw py::cast_error();
    c = obj.cast<double>();
  } catch (const py::cast_error&) {
    throw_invalid("capacity: expected a number, got ", std::string(py::repr(obj)));
  }
  if (!std::isfinite(c) || c < 0) throw_invalid("capacity = ", c, " must be a finite number >= 0");
  return c;
}

/// Everything `balance` needs, converted and checked with the GIL held.
struct balance_call {
  lengths_view lengths;
  mmbal::spec::any_cost cost;
  mmbal::spec::algorithm_spec algorithm;  // None: spec::default_algorithm of the cost
  std::optional<unsigned_view<std::uint32_t>> origin;
  std::optional<u64_view> groups, bytes;
  mmbal::balance::problem problem;

  balance_call(py::handle lengths_in, py::handle ranks_in, py::handle algorithm_spec, py::handle cost_spec,
               py::handle origin_in, py::handle count_cap, py::handle capacity, py::handle groups_in,
               py::handle bytes_in, py::handle ranks_per_node)
      : lengths(lengths_in, "lengths", u32_max),
        cost(mmbal::spec::parse_cost(text_arg(cost_spec, "cost"))),
        algorithm(algorithm_spec.is_none() ? mmbal::spec::default_algorithm(cost)
                                           : mmbal::spec::parse_algorithm(text_arg(algorithm_spec, "algorithm"))) {
    problem.weights = lengths.values;
    problem.bins = rank_count(ranks_in, "ranks");
    if (!origin_in.is_none()) {
      origin.emplace(origin_in, "origin", problem.bins - std::uint64_t{1});
      if (origin->size() != lengths.size())
        throw_invalid("origin has ", origin->size(), " entries but lengths has ", lengths.size());
      problem.origin = origin->values;
    } else if (algorithm.base == mmbal::spec::algorithm_kind::migrate) {
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
      problem.item_bytes = bytes->values;
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
  out.placement = mmbal::spec::solve(c.algorithm, c.cost, c.problem);
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

py::tuple balance(py::handle lengths, py::handle ranks, py::handle algorithm, py::handle cost, py::handle origin,
                  py::handle count_cap, py::handle capacity, py::handle groups, py::handle bytes,
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
double time_balance(py::handle lengths, py::handle ranks, py::handle algorithm, py::handle cost,
                    py::handle repeats_in) {
  const auto repeats = static_cast<int>(int_in_range(repeats_in, "repeats", 1, 1'000'000));
  const py::none none;
  const balance_call call(lengths, ranks, algorithm, cost, none, none, none, none, none, none);
  py::gil_scoped_release unlocked;
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const balance_result r = solve(call);
    const auto t1 = std::chrono::steady_clock::now();
    if (r.placement.size() != call.lengths.size()) throw_invalid("time_balance: lost items");
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

py::array_t<double> assignment_loads(py::handle rank, py::handle slot, py::handle ranks, py::handle lengths,
                                     py::handle cost_spec) {
  const mmbal::assignment a = to_assignment(rank, slot, rank_count(ranks, "ranks"), "assignment");
  const lengths_view w(lengths, "lengths", u32_max);
  if (w.size() != a.size()) throw_invalid("lengths has ", w.size(), " entries but the assignment has ", a.size());
  const mmbal::spec::any_cost cost = mmbal::spec::parse_cost(text_arg(cost_spec, "cost"));
  std::vector<double> loads;
  {
    py::gil_scoped_release unlocked;
    loads = std::visit(
        [&](const auto& c) {
          (void)mmbal::lower_bound(w.values, a.bins, c);  // refuses costs that overflow a double, as balance does
          return mmbal::bin_loads(a, w.values, c);
        },
        cost);
  }
  return to_numpy(std::move(loads));
}

// ------------------------------------------------------------------ all-to-all plans

/// What a plan is derived from: the rearrangement and the item sizes in rows. Shared by a plan
/// and its inverse.
struct plan_source {
  std::shared_ptr<const mmbal::rearrangement> moves;  ///< may alias into an orchestration
  std::vector<std::uint64_t> sizes;
};

/// One rank's all-to-all plan in the form a tensor exchange uses (see the `AllToAllPlan`
/// docstring below).
struct py_plan {
  mmbal::rank_t rank = 0;
  mmbal::rank_t ranks = 0;
  py::tuple send_splits, recv_splits;  // handed out as new lists: the plan's own are immutable
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

/// The most rows of one rank's input or output a plan indexes.
constexpr std::uint64_t max_plan_rows = u32_max;

plan_arrays compute_plan(const plan_source& s, mmbal::rank_t rank) {
  plan_arrays out;
  out.plan = mmbal::make_alltoall_plan(*s.moves, s.sizes, rank);
  const mmbal::alltoall_plan& p = out.plan;
  // The index arrays hold 8 bytes per row: refuse row counts no tensor of one rank has
  // before allocating them (a state of a few bytes asked for gigabytes, or for 2^62 rows).
  if (p.input_bytes > max_plan_rows || p.output_bytes > max_plan_rows)
    throw_invalid("alltoall_plan: rank ", rank, " would hold ", p.input_bytes, " rows before and ", p.output_bytes,
                  " after the exchange (at most 2^32 - 1 each: the plan keeps an 8-byte index per row)");
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
  out.fingerprint = mmbal::fingerprint(*s.moves, s.sizes);
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
  out.send_splits = py::tuple(to_list(a.plan.send_counts));
  out.recv_splits = py::tuple(to_list(a.plan.recv_counts));
  out.source_rows = a.plan.input_bytes;
  out.dest_rows = a.plan.output_bytes;
  out.send_items = read_only(to_numpy(std::move(a.send_items)));
  out.recv_items = read_only(to_numpy(std::move(a.recv_items)));
  out.pack_index = read_only(to_numpy(std::move(a.pack_index)));
  out.unpack_index = read_only(to_numpy(std::move(a.unpack_index)));
  out.fingerprint = a.fingerprint;
  out.source = std::move(source);
  return out;
}

py_plan py_plan::inverse() const {
  auto back = std::make_shared<plan_source>(
      plan_source{std::make_shared<const mmbal::rearrangement>(source->moves->inverse()), source->sizes});
  return make_py_plan(std::move(back), rank);
}

u64_view item_sizes(py::handle sizes, std::size_t items) {
  u64_view s(sizes, "sizes", i64_max);
  if (s.size() != items) throw_invalid("sizes has ", s.size(), " entries but there are ", items, " items");
  return s;
}

/// Pickled state of a plan: (rank, ranks, source rank, source slot, destination rank,
/// destination slot, sizes) per item — what it is derived from; unpickling derives it again
/// (same arrays, same fingerprint). O(items + rows of the rank).
py::tuple plan_state(const py_plan& p) {
  const mmbal::rearrangement& m = *p.source->moves;
  const mmbal::assignment source{m.ranks, m.source}, destination{m.ranks, m.destination};
  const py::tuple from = from_assignment(source), to = from_assignment(destination);
  std::vector<std::int64_t> sizes(p.source->sizes.begin(), p.source->sizes.end());
  return py::make_tuple(p.rank, p.ranks, from[0], from[1], to[0], to[1], to_numpy(std::move(sizes)));
}

py_plan plan_from_state(const py::tuple& state) {
  if (state.size() != 7) throw_invalid("AllToAllPlan: a pickled state has 7 fields, got ", state.size());
  const mmbal::rank_t ranks = rank_count(state[1], "AllToAllPlan state: ranks");
  const mmbal::rank_t rank = rank_index(state[0], "AllToAllPlan state: rank", ranks);
  const mmbal::assignment from = to_assignment(state[2], state[3], ranks, "AllToAllPlan state: source");
  const mmbal::assignment to = to_assignment(state[4], state[5], ranks, "AllToAllPlan state: destination");
  const u64_view sizes = item_sizes(state[6], to.size());
  auto source = std::make_shared<plan_source>(
      plan_source{std::make_shared<const mmbal::rearrangement>(mmbal::rearrangement::between(from, to)),
                  {sizes.values.begin(), sizes.values.end()}});
  return make_py_plan(std::move(source), rank);
}

py_plan alltoall_plan(py::handle source_rank, py::handle target_rank, py::handle target_slot, py::handle target_ranks,
                      py::handle sizes, py::handle rank) {
  const mmbal::rank_t ranks = rank_count(target_ranks, "target.ranks");
  const mmbal::assignment target = to_assignment(target_rank, target_slot, ranks, "target");
  const unsigned_view<std::uint32_t> origin(source_rank, "source_rank", ranks - std::uint64_t{1});
  if (origin.size() != target.size())
    throw_invalid("source_rank has ", origin.size(), " entries but target has ", target.size(), " items");
  const u64_view s = item_sizes(sizes, target.size());
  const mmbal::rank_t me = rank_index(rank, "rank", ranks);
  auto source = std::make_shared<plan_source>(plan_source{
      std::make_shared<const mmbal::rearrangement>(mmbal::rearrangement::from_origin(origin.values, target)),
      {s.values.begin(), s.values.end()}});
  return make_py_plan(std::move(source), me);
}

// ------------------------------------------------------------------ verl drop-in

py::list balanced_partitions(py::handle seqlen_list, py::handle k_partitions, py::handle equal_size,
                             py::handle refine_in) {
  const u64_view w(seqlen_list, "seqlen_list", std::uint64_t{1} << 53);
  const mmbal::rank_t k = rank_count(k_partitions, "k_partitions");
  const bool flag = as_flag(equal_size, "equal_size");
  const bool refine = as_flag(refine_in, "refine");
  std::vector<std::uint64_t> weights(w.values.begin(), w.values.end());
  std::vector<std::vector<std::uint32_t>> parts;
  {
    py::gil_scoped_release unlocked;
    parts = mmbal_python::balanced_partitions(weights, k, flag, refine);
  }
  py::list out(parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) out[p] = to_list(parts[p]);
  return out;
}

// ------------------------------------------------------------------ workload and orchestrator

/// A workload built from flat arrays (see the `Workload` docstring below).
struct py_workload {
  mmbal::workload w;
  std::vector<std::size_t> first_segment;  ///< per sample + 1: the row of its first segment

  py_workload(py::handle sample_rank, py::handle segment_sample, py::handle segment_modality, py::handle segment_tokens,
              py::handle segment_encoder_len, py::handle sample_group, py::handle modalities) {
    const unsigned_view<std::uint32_t> rank(sample_rank, "sample_rank", u32_max);
    const std::size_t samples = mmbal::checked_count(rank.size(), "samples");
    const u64_view owner(segment_sample, "segment_sample", samples == 0 ? 0 : samples - 1);
    const std::size_t segments = owner.size();
    if (samples == 0 && segments > 0) throw_invalid("segment_sample: ", segments, " segments but no samples");
    const lengths_view tokens(segment_tokens, "segment_tokens", u32_max);
    if (tokens.size() != segments)
      throw_invalid("segment_tokens has ", tokens.size(), " entries but segment_sample has ", segments);
    std::optional<lengths_view> encoder;
    if (!segment_encoder_len.is_none()) {
      encoder.emplace(segment_encoder_len, "segment_encoder_len", u32_max);
      if (encoder->size() != segments)
        throw_invalid("segment_encoder_len has ", encoder->size(), " entries but segment_sample has ", segments);
    }
    std::vector<mmbal::modality_id> modality(segments);
    auto intern = [&](py::handle name, const std::string& where) {
      const std::string text = text_arg(name, where);
      try {
        return w.intern_modality(text);
      } catch (const mmbal::invalid_input& e) {
        throw_invalid(where, ": ", e.what());
      }
    };
    if (!modalities.is_none()) {
      // Integer ids into `modalities` (fast for large batches: no Python string per segment).
      if (!py::isinstance<py::sequence>(modalities) || py::isinstance<py::str>(modalities))
        throw_invalid("modalities: expected a sequence of modality names (str)");
      const auto names = py::reinterpret_borrow<py::sequence>(modalities);
      const std::size_t count = py::len(names);
      if (count == 0) throw_invalid("modalities: empty (need at least the names the segments use)");
      // Every name is checked (in a scratch workload), but the workload interns them in the
      // order the segments first use them, as the string form does: the phases, their order
      // and the plan fingerprint are then the same for both forms of one batch.
      std::vector<std::string> text(count);
      mmbal::workload scratch;
      for (std::size_t j = 0; j < count; ++j) {
        const std::string where = "modalities[" + std::to_string(j) + "]";
        text[j] = text_arg(names[j], where);
        try {
          (void)scratch.intern_modality(text[j]);
        } catch (const mmbal::invalid_input& e) {
          throw_invalid(where, ": ", e.what());
        }
      }
      const unsigned_view<std::uint32_t> ids(segment_modality, "segment_modality", count - 1);
      if (ids.size() != segments)
        throw_invalid("segment_modality has ", ids.size(), " entries but segment_sample has ", segments);
      std::vector<std::optional<mmbal::modality_id>> id_of(count);
      for (std::size_t k = 0; k < segments; ++k) {
        auto& id = id_of[ids.values[k]];
        if (!id) id = w.intern_modality(text[ids.values[k]]);
        modality[k] = *id;
      }
    } else {
      if (!py::isinstance<py::sequence>(segment_modality) || py::isinstance<py::str>(segment_modality))
        throw_invalid("segment_modality: expected a sequence of modality names (str), one per segment");
      const auto names = py::reinterpret_borrow<py::sequence>(segment_modality);
      if (static_cast<std::size_t>(py::len(names)) != segments)
        throw_invalid("segment_modality has ", py::len(names), " entries but segment_sample has ", segments);
      for (std::size_t k = 0; k < segments; ++k)
        modality[k] = intern(names[k], "segment_modality[" + std::to_string(k) + "]");
    }
    std::optional<u64_view> group;
    if (!sample_group.is_none()) {
      group.emplace(sample_group, "sample_group", (std::uint64_t{1} << 63) - 1);
      if (group->size() != samples)
        throw_invalid("sample_group has ", group->size(), " entries but sample_rank has ", samples);
    }
    w.samples.resize(samples);
    first_segment.assign(samples + 1, 0);
    for (std::size_t k = 0; k < segments; ++k) {
      if (k > 0 && owner.values[k] < owner.values[k - 1])
        throw_invalid("segment_sample[", k, "] = ", owner.values[k], " < segment_sample[", k - 1,
                      "] = ", owner.values[k - 1], ": list the segments sample by sample, in sequence order");
      ++first_segment[owner.values[k] + 1];
    }
    for (std::size_t s = 0; s < samples; ++s) {
      first_segment[s + 1] += first_segment[s];
      mmbal::sample& x = w.samples[s];
      x.id = s;
      x.rank = rank.values[s];
      if (group) x.group = group->values[s];
      x.segments.reserve(first_segment[s + 1] - first_segment[s]);
    }
    for (std::size_t k = 0; k < segments; ++k) {
      const mmbal::length_t t = tokens.values[k];
      w.samples[owner.values[k]].segments.push_back(mmbal::segment{modality[k], t, encoder ? encoder->values[k] : t});
    }
    for (std::size_t s = 0; s < samples; ++s)
      if (w.samples[s].llm_length() > u32_max)
        throw_invalid("sample ", s, ": LLM length ", w.samples[s].llm_length(), " exceeds 2^32 - 1");
  }
};

/// Pickled state of a workload: the constructor's arguments in the integer-id form (sample
/// rank, segment sample, modality id, tokens, encoder length, groups or None, names).
/// Unpickling constructs it again; the names are interned in first-use order both times, so
/// the modality list, phases and fingerprints are the same. O(samples + segments).
py::tuple workload_state(const py_workload& x) {
  const std::size_t segments = x.first_segment.back();
  std::vector<std::int64_t> rank, owner, modality, tokens, encoder, group;
  rank.reserve(x.w.samples.size());
  owner.reserve(segments);
  modality.reserve(segments);
  tokens.reserve(segments);
  encoder.reserve(segments);
  const bool grouped = !x.w.samples.empty() && x.w.samples.front().group.has_value();
  for (std::size_t s = 0; s < x.w.samples.size(); ++s) {
    const mmbal::sample& sample = x.w.samples[s];
    rank.push_back(sample.rank);
    if (grouped) group.push_back(static_cast<std::int64_t>(*sample.group));
    for (const mmbal::segment& g : sample.segments) {
      owner.push_back(static_cast<std::int64_t>(s));
      modality.push_back(g.modality);
      tokens.push_back(g.llm_tokens);
      encoder.push_back(g.encoder_len);
    }
  }
  return py::make_tuple(to_numpy(std::move(rank)), to_numpy(std::move(owner)), to_numpy(std::move(modality)),
                        to_numpy(std::move(tokens)), to_numpy(std::move(encoder)),
                        grouped ? py::object(to_numpy(std::move(group))) : py::object(py::none()),
                        py::list(py::cast(x.w.modalities)));
}

std::shared_ptr<py_workload> workload_from_state(const py::tuple& state) {
  if (state.size() != 7) throw_invalid("Workload: a pickled state has 7 fields, got ", state.size());
  return std::make_shared<py_workload>(state[0], state[1], state[2], state[3], state[4], state[5], state[6]);
}

/// A phase policy from a Python value: `(cost_spec, algorithm_spec)` or a dict with keys
/// `cost`, `algorithm`, `count_cap`, `capacity`, `keep_groups` (missing = the phase default).
mmbal::orchestrate::phase_policy to_policy(const std::string& phase, py::handle value) {
  std::string cost, algorithm;
  py::object count_cap = py::none(), capacity = py::none();
  bool keep_groups = false;
  if (py::isinstance<py::dict>(value)) {
    for (auto [key, v] : py::reinterpret_borrow<py::dict>(value)) {
      const std::string k = py::str(key);
      if (k == "cost" || k == "algorithm") {
        (k == "cost" ? cost : algorithm) = text_arg(v, "policies['" + phase + "']['" + k + "']");
      } else if (k == "count_cap")
        count_cap = py::reinterpret_borrow<py::object>(v);
      else if (k == "capacity")
        capacity = py::reinterpret_borrow<py::object>(v);
      else if (k == "keep_groups")
        keep_groups = as_flag(v, ("policies['" + phase + "']['keep_groups']").c_str());
      else
        throw_invalid("policies['", phase, "']: unknown key '", k,
                      "' (expected cost, algorithm, count_cap, capacity, keep_groups)");
    }
  } else if (py::isinstance<py::tuple>(value) && py::len(value) == 2) {
    auto t = py::reinterpret_borrow<py::tuple>(value);
    cost = text_arg(t[0], "policies['" + phase + "'][0] (the cost spec)");
    algorithm = text_arg(t[1], "policies['" + phase + "'][1] (the algorithm spec)");
  } else {
    throw_invalid("policies['", phase, "']: expected (cost_spec, algorithm_spec) or a dict, got ",
                  std::string(py::repr(value)));
  }
  mmbal::orchestrate::phase_policy p = mmbal::spec::policy_from_specs(phase, cost, algorithm);
  p.counts = to_count_cap(count_cap);
  p.capacity = to_capacity(capacity);
  p.keep_groups = keep_groups;
  return p;
}

/// An orchestration and the workload it was planned for (see the `Orchestration` docstring).
struct py_orchestration {
  std::shared_ptr<const mmbal::orchestrate::orchestration> plan;
  std::shared_ptr<const py_workload> workload;

  [[nodiscard]] const mmbal::orchestrate::phase_plan& phase(const std::string& name) const { return plan->phase(name); }
  [[nodiscard]] const mmbal::orchestrate::composed_plan& composed(const std::string& modality) const {
    for (const auto& c : plan->composed)
      if (c.modality == modality) return c;
    throw_invalid("orchestration: no encoder phase '", modality, "' (phases: ", phase_list(), ")");
  }
  [[nodiscard]] std::string phase_list() const {
    std::string out;
    for (const auto& p : plan->phases) out += (out.empty() ? "" : ", ") + p.name;
    return out;
  }

  [[nodiscard]] py::list phases() const {
    py::list out;
    for (const auto& p : plan->phases) out.append(p.name);
    return out;
  }

  /// Per item of `phase`: its sample, and its segment row in the workload (-1 for "llm").
  [[nodiscard]] py::tuple items(py::handle phase_name) const {
    const std::string name = text_arg(phase_name, "phase");
    const auto& p = phase(name);
    const std::size_t n = p.items.size();
    std::vector<std::int64_t> sample(n), segment(n), length(n);
    for (std::size_t i = 0; i < n; ++i) {
      sample[i] = p.items.sample_of[i];
      segment[i] =
          name == "llm"
              ? -1
              : static_cast<std::int64_t>(workload->first_segment[p.items.sample_of[i]] + p.items.segment_of[i]);
      length[i] = p.items.weights[i];
    }
    return py::make_tuple(to_numpy(std::move(sample)), to_numpy(std::move(segment)), to_numpy(std::move(length)));
  }

  /// (origin rank, target rank, target slot) per item of `phase` (after relabeling).
  [[nodiscard]] py::tuple target(py::handle phase_name) const {
    const auto& p = phase(text_arg(phase_name, "phase"));
    const std::size_t n = p.items.size();
    std::vector<std::int32_t> origin(n), rank(n), slot(n);
    for (std::size_t i = 0; i < n; ++i) {
      origin[i] = static_cast<std::int32_t>(p.items.origin[i]);
      rank[i] = static_cast<std::int32_t>(p.forward.destination[i].rank);
      slot[i] = static_cast<std::int32_t>(p.forward.destination[i].slot);
    }
    return py::make_tuple(to_numpy(std::move(origin)), to_numpy(std::move(rank)), to_numpy(std::move(slot)),
                          to_numpy(std::vector<double>(p.report.loads_after)), p.report.lower_bound, p.report.cost);
  }

  /// (source rank, source slot, target rank, target slot) per segment of `modality` for the
  /// composed encoder→LLM plan.
  [[nodiscard]] py::tuple composed_layout(py::handle modality) const {
    const auto& c = composed(text_arg(modality, "modality"));
    const std::size_t n = c.composed.size();
    std::vector<std::int32_t> src_rank(n), src_slot(n), dst_rank(n), dst_slot(n);
    for (std::size_t i = 0; i < n; ++i) {
      src_rank[i] = static_cast<std::int32_t>(c.composed.source[i].rank);
      src_slot[i] = static_cast<std::int32_t>(c.composed.source[i].slot);
      dst_rank[i] = static_cast<std::int32_t>(c.composed.destination[i].rank);
      dst_slot[i] = static_cast<std::int32_t>(c.composed.destination[i].slot);
    }
    return py::make_tuple(to_numpy(std::move(src_rank)), to_numpy(std::move(src_slot)), to_numpy(std::move(dst_rank)),
                          to_numpy(std::move(dst_slot)));
  }

  [[nodiscard]] py::dict report(py::handle phase_name) const {
    py::dict d;
    mmbal::orchestrate::for_each_field(phase(text_arg(phase_name, "phase")).report,
                                       [&](std::string_view key, const auto& value) {
                                         using T = std::decay_t<decltype(value)>;
                                         if constexpr (std::is_same_v<T, std::vector<double>>)
                                           d[py::str(std::string(key))] = to_numpy(std::vector<double>(value));
                                         else
                                           d[py::str(std::string(key))] = value;
                                       });
    return d;
  }

  /// A plan over `moves` (aliasing into this orchestration) with `sizes` rows per item, or
  /// `default_sizes` when `sizes` is None.
  [[nodiscard]] py_plan make_plan(const mmbal::rearrangement& moves, const std::vector<std::uint64_t>& default_sizes,
                                  py::handle sizes, py::handle rank) const {
    const mmbal::rank_t me = rank_index(rank, "rank", plan->ranks);
    std::vector<std::uint64_t> rows;
    if (sizes.is_none()) {
      rows = default_sizes;
    } else {
      const u64_view s = item_sizes(sizes, moves.size());
      rows.assign(s.values.begin(), s.values.end());
    }
    auto source = std::make_shared<plan_source>(
        plan_source{std::shared_ptr<const mmbal::rearrangement>(plan, &moves), std::move(rows)});
    return make_py_plan(std::move(source), me);
  }

  [[nodiscard]] py_plan phase_plan(py::handle phase_name, py::handle rank, py::handle sizes) const {
    const auto& p = phase(text_arg(phase_name, "phase"));
    return make_plan(p.forward, p.item_bytes, sizes, rank);
  }
  [[nodiscard]] py_plan composed_plan(py::handle modality, py::handle rank, py::handle sizes) const {
    const auto& c = composed(text_arg(modality, "modality"));
    return make_plan(c.composed, c.item_bytes, sizes, rank);
  }
};

struct py_orchestrator {
  mmbal::orchestrate::orchestrator core;

  static mmbal::orchestrate::orchestrator make(py::handle ranks, py::handle ranks_per_node, py::handle policies,
                                               py::handle threads, py::handle bytes_per_token, py::handle relabel) {
    mmbal::orchestrate::orchestrator_options o;
    o.ranks = rank_count(ranks, "ranks");
    o.ranks_per_node = rank_index(ranks_per_node, "ranks_per_node", u32_max);
    o.threads = threads.is_none() ? 0 : static_cast<unsigned>(int_in_range(threads, "threads", 0, 1024));
    o.bytes_per_token = positive_count(bytes_per_token, "bytes_per_token");
    o.relabel = as_flag(relabel, "relabel");
    mmbal::orchestrate::orchestrator out(o);
    if (!policies.is_none()) {
      if (!py::isinstance<py::dict>(policies)) throw_invalid("policies: expected a dict phase -> policy");
      for (auto [key, value] : py::reinterpret_borrow<py::dict>(policies)) {
        const std::string phase = text_arg(key, "policies: a phase name");
        out.set_policy(phase, to_policy(phase, value));
      }
    }
    return out;
  }

  py_orchestrator(py::handle ranks, py::handle ranks_per_node, py::handle policies, py::handle threads,
                  py::handle bytes_per_token, py::handle relabel)
      : core(make(ranks, ranks_per_node, policies, threads, bytes_per_token, relabel)) {}

  std::shared_ptr<mmbal::orchestrate::plan_workspace> workspace =
      std::make_shared<mmbal::orchestrate::plan_workspace>();
  std::shared_ptr<std::mutex> workspace_mutex = std::make_shared<std::mutex>();

  [[nodiscard]] py_orchestration plan(std::shared_ptr<const py_workload> w) {
    if (!w) throw_invalid("Orchestrator.plan: workload is None");
    auto out = std::make_shared<mmbal::orchestrate::orchestration>();
    {
      py::gil_scoped_release unlocked;
      // This Orchestrator's workspace, so that the next step reuses its buffers; a call made
      // while another thread plans with it uses a fresh one (same plan either way).
      std::unique_lock lock(*workspace_mutex, std::try_to_lock);
      mmbal::orchestrate::plan_workspace temporary;
      core.plan(w->w, *out, lock.owns_lock() ? *workspace : temporary);
    }
    return py_orchestration{std::move(out), std::move(w)};
  }
};

// ------------------------------------------------------------------ ISF, CP distribution, masks

py::tuple isf(py::handle vision, py::handle text, py::handle qv, py::handle qt, py::handle qv_target,
              py::handle qt_target, py::handle iterations, py::handle seed, py::handle oversize_in,
              py::handle drop_unfilled, py::handle sort_tail) {
  const lengths_view v(vision, "vision", u32_max);
  const lengths_view t(text, "text", u32_max);
  if (v.size() != t.size()) throw_invalid("vision has ", v.size(), " entries but text has ", t.size());
  mmbal::sampling::isf_options o;
  // Caps of 64 bits, as in C++ and the tool (a cap above every sample is "no cap").
  o.qv = int_in_range(qv, "qv", 1, std::numeric_limits<std::uint64_t>::max());
  o.qt = int_in_range(qt, "qt", 1, std::numeric_limits<std::uint64_t>::max());
  if (!qv_target.is_none()) o.qv_target = int_in_range(qv_target, "qv_target", 0, o.qv);
  if (!qt_target.is_none()) o.qt_target = int_in_range(qt_target, "qt_target", 0, o.qt);
  o.iterations =
      static_cast<std::uint32_t>(int_in_range(iterations, "iterations", 0, mmbal::sampling::max_isf_iterations));
  o.seed = int_in_range(seed, "seed", 0, std::numeric_limits<std::uint64_t>::max());
  using policy = mmbal::sampling::oversize_policy;
  const std::string oversize = text_arg(oversize_in, "oversize");
  if (oversize == "singleton")
    o.oversize = policy::singleton;
  else if (oversize == "reject")
    o.oversize = policy::reject;
  else if (oversize == "drop")
    o.oversize = policy::drop;
  else
    throw_invalid("oversize = '", oversize, "' (expected 'singleton', 'reject' or 'drop')");
  o.drop_unfilled = as_flag(drop_unfilled, "drop_unfilled");
  o.sort_tail = as_flag(sort_tail, "sort_tail");
  mmbal::sampling::isf_result r;
  {
    py::gil_scoped_release unlocked;
    r = mmbal::sampling::isf(v.values, t.values, o);
  }
  std::vector<std::int64_t> members(r.groups.members.begin(), r.groups.members.end());
  std::vector<std::int64_t> offsets(r.groups.offsets.begin(), r.groups.offsets.end());
  std::vector<std::int64_t> singletons(r.singletons.begin(), r.singletons.end());
  std::vector<std::int64_t> dropped(r.dropped.begin(), r.dropped.end());
  py::dict stats;
  const auto& q = r.stats.thresholds;
  stats["qv"] = q.qv;
  stats["qt"] = q.qt;
  stats["qv_target"] = q.qv_target;
  stats["qt_target"] = q.qt_target;
  stats["iterations_run"] = r.stats.iterations_run;
  stats["kept_per_iteration"] = r.stats.kept_per_iteration;
  stats["leftover_samples"] = r.stats.leftover_samples;
  stats["final_groups"] = r.stats.final_groups;
  return py::make_tuple(to_numpy(std::move(members)), to_numpy(std::move(offsets)), to_numpy(std::move(singletons)),
                        to_numpy(std::move(dropped)), stats);
}

py::dict distribution_dict(const mmbal::token_distribution& d) {
  if (d.total_workload > i64_max)  // the dict's workloads are int64
    throw_invalid("distribute_tokens: the block workloads sum to ", d.total_workload, ", above 2^63 - 1");
  py::dict out;
  out["tokens"] = d.tokens;
  out["block"] = d.block;
  out["ranks"] = d.ranks;
  std::vector<std::int32_t> rank_of_block(d.rank_of_block.begin(), d.rank_of_block.end());
  std::vector<std::int64_t> rank_tokens(d.rank_tokens.begin(), d.rank_tokens.end());
  std::vector<std::int64_t> rank_workloads(d.rank_workloads.begin(), d.rank_workloads.end());
  out["rank_of_block"] = to_numpy(std::move(rank_of_block));
  out["rank_tokens"] = to_numpy(std::move(rank_tokens));
  out["rank_workloads"] = to_numpy(std::move(rank_workloads));
  out["total_workload"] = d.total_workload;
  out["max_over_mean"] = d.max_over_mean();
  py::list indices;
  for (mmbal::rank_t r = 0; r < d.ranks; ++r) {
    std::vector<std::uint64_t> idx = d.token_indices(r);
    indices.append(to_numpy(std::vector<std::int64_t>(idx.begin(), idx.end())));
  }
  out["token_indices"] = indices;
  return out;
}

py::dict distribute_tokens(py::handle block_workloads, py::handle tokens, py::handle ranks, py::handle block,
                           py::handle distributor_in, py::handle seed) {
  const u64_view w(block_workloads, "block_workloads", std::numeric_limits<std::uint64_t>::max());
  // token_indices holds one int64 per token, built here: at most 2^28 tokens (2 GiB of
  // indices; a long-context pack has millions), so one block of 2^32 - 1 tokens given as a
  // one-element list cannot ask for 32 GiB.
  const std::uint64_t t = int_in_range(tokens, "tokens", 0, std::uint64_t{1} << 28);
  const mmbal::rank_t g = rank_count(ranks, "ranks");
  const std::uint32_t b = positive_count(block, "block");
  const std::string distributor = text_arg(distributor_in, "distributor");
  const mmbal::spec::any_distributor d = mmbal::spec::parse_distributor(
      distributor, int_in_range(seed, "seed", 0, std::numeric_limits<std::uint64_t>::max()));
  mmbal::token_distribution out;
  {
    py::gil_scoped_release unlocked;
    out = mmbal::spec::distribute_tokens(w.values, t, b, g, d);
  }
  return distribution_dict(out);
}

/// A bitfield attention mask (see the `BitfieldMask` docstring below).
struct py_mask {
  mmbal::bitfield_mask mask;

  [[nodiscard]] py::array_t<std::uint64_t> bits() const {
    // A NumPy-owned copy (the mask keeps its own buffer).
    return py::array_t<std::uint64_t>(static_cast<py::ssize_t>(mask.size()), mask.bits().data());
  }
  [[nodiscard]] py::array_t<std::int64_t> documents() const {
    return to_numpy(std::vector<std::int64_t>(mask.documents().begin(), mask.documents().end()));
  }
  [[nodiscard]] py::array_t<std::int64_t> token_workloads() const {
    std::vector<std::uint32_t> w;
    {
      py::gil_scoped_release unlocked;
      w = mmbal::token_workloads(mask);
    }
    return to_numpy(std::vector<std::int64_t>(w.begin(), w.end()));
  }
  [[nodiscard]] py::array_t<std::int64_t> block_workloads(py::handle block) const {
    const std::uint32_t b = positive_count(block, "block");
    std::vector<std::uint64_t> w;
    {
      py::gil_scoped_release unlocked;
      w = mmbal::block_workloads(mask, b);
    }
    return to_numpy(std::vector<std::int64_t>(w.begin(), w.end()));
  }
  [[nodiscard]] py::array dense() const {
    std::vector<std::uint8_t> d = mmbal::dense_mask(mask);
    const auto n = static_cast<py::ssize_t>(mask.size());
    return to_numpy(std::move(d)).attr("view")("bool").attr("reshape")(n, n);
  }
  [[nodiscard]] py::dict block_mask(py::handle q_block, py::handle kv_block) const {
    const std::uint32_t qb = positive_count(q_block, "q_block"), kb = positive_count(kv_block, "kv_block");
    mmbal::block_mask m;
    {
      py::gil_scoped_release unlocked;
      m = mmbal::make_block_mask(mask, qb, kb);
    }
    // FlexAttention's BlockMask.from_kv_blocks layout: int32, (B=1, H=1, rows[, cols]).
    auto shaped = [](const std::vector<std::uint32_t>& v, std::uint32_t rows, std::int64_t cols) {
      py::array a = to_numpy(std::vector<std::int32_t>(v.begin(), v.end()));
      return cols < 0 ? a.attr("reshape")(1, 1, rows) : a.attr("reshape")(1, 1, rows, cols);
    };
    py::dict out;
    out["kv_num_blocks"] = shaped(m.kv_num_blocks, m.num_q_blocks, -1);
    out["kv_indices"] = shaped(m.kv_indices, m.num_q_blocks, m.num_kv_blocks);
    out["full_kv_num_blocks"] = shaped(m.full_kv_num_blocks, m.num_q_blocks, -1);
    out["full_kv_indices"] = shaped(m.full_kv_indices, m.num_q_blocks, m.num_kv_blocks);
    out["q_num_blocks"] = shaped(m.q_num_blocks, m.num_kv_blocks, -1);
    out["q_indices"] = shaped(m.q_indices, m.num_kv_blocks, m.num_q_blocks);
    out["full_q_num_blocks"] = shaped(m.full_q_num_blocks, m.num_kv_blocks, -1);
    out["full_q_indices"] = shaped(m.full_q_indices, m.num_kv_blocks, m.num_q_blocks);
    out["block_size"] = py::make_tuple(m.q_block_size, m.kv_block_size);
    out["seq_lengths"] = py::make_tuple(mask.size(), mask.size());
    return out;
  }
};

py_mask mask_from_bits(py::handle bits, py::handle documents) {
  const u64_view b(bits, "bits", std::numeric_limits<std::uint64_t>::max());
  const unsigned_view<std::uint32_t> d(documents, "documents", u32_max);
  return py_mask{mmbal::bitfield_mask({b.values.begin(), b.values.end()}, {d.values.begin(), d.values.end()})};
}

py_mask mask_of_workload(const py_workload& w, py::handle samples, py::handle assign_in, py::handle layout_in) {
  const std::string assign = text_arg(assign_in, "assign"), layout = text_arg(layout_in, "layout");
  mmbal::bit_assignment a{};
  if (assign == "modality")
    a = mmbal::bit_assignment::modality;
  else if (assign == "span")
    a = mmbal::bit_assignment::span;
  else
    throw_invalid("assign = '", assign, "' (expected 'modality' or 'span')");
  mmbal::span_layout l{};
  if (layout == "embedded")
    l = mmbal::span_layout::embedded;
  else if (layout == "prefixed")
    l = mmbal::span_layout::prefixed;
  else
    throw_invalid("layout = '", layout, "' (expected 'embedded' or 'prefixed')");
  std::vector<mmbal::sample> chosen;
  if (samples.is_none()) {
    chosen = w.w.samples;
  } else {
    const unsigned_view<std::uint32_t> s(samples, "samples",
                                         w.w.samples.empty() ? 0 : w.w.samples.size() - std::uint64_t{1});
    if (w.w.samples.empty() && s.size() > 0) throw_invalid("samples: the workload has no samples");
    for (std::uint32_t i : s.values) chosen.push_back(w.w.samples[i]);
  }
  py_mask out;
  {
    py::gil_scoped_release unlocked;
    out.mask = mmbal::build_bitfield_mask(std::span<const mmbal::sample>(chosen), a, l);
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ fitted cost, pipeline orders

/// Per data-parallel rank, the lengths of its samples: `ranks` a sequence of integer arrays,
/// named `name` (and `name[r]`) in errors.
std::vector<std::vector<mmbal::length_t>> per_rank_lengths(py::handle ranks, const std::string& name) {
  if (!py::isinstance<py::sequence>(ranks) || py::isinstance<py::str>(ranks))
    throw_invalid(name, ": expected a sequence of per-rank length arrays, got ", std::string(py::repr(ranks)));
  const auto seq = py::reinterpret_borrow<py::sequence>(ranks);
  std::vector<std::vector<mmbal::length_t>> out;
  out.reserve(py::len(seq));
  for (std::size_t r = 0; r < py::len(seq); ++r) {
    const lengths_view l(seq[r], (name + "[" + std::to_string(r) + "]").c_str(), u32_max);
    out.emplace_back(l.values.begin(), l.values.end());
  }
  return out;
}

/// One measured step from Python: `ranks` as `per_rank_lengths`, `step_time` the measured
/// time (> 0), named `steps[index]` in errors.
mmbal::cost::observed_step to_step(py::handle ranks, py::handle step_time, std::size_t index) {
  const std::string where = "steps[" + std::to_string(index) + "]";
  return {per_rank_lengths(ranks, where + ".ranks"), number_arg(step_time, (where + ".step_time").c_str())};
}

mmbal::cost::fit_options to_fit_options(py::handle temperature) {
  mmbal::cost::fit_options o;
  o.temperature = number_arg(temperature, "temperature");
  return o;  // checked by the fitter, which names it
}

py::dict fit_dict(const mmbal::cost::fit_result& r) {
  py::dict d;
  d["x"] = r.model.x();
  d["y"] = r.model.y();
  d["z"] = r.model.z();
  d["cost"] = mmbal::spec::to_spec(mmbal::spec::any_cost{r.model});
  d["error_mean"] = r.error.mean;
  d["error_max"] = r.error.max;
  d["objective"] = r.objective;
  d["iterations"] = r.iterations;
  d["initial"] = py::make_tuple(r.initial.x(), r.initial.y(), r.initial.z());
  return d;
}

/// `fit_cost` over `steps`, a sequence of (ranks, step_time) pairs. The GIL is released while fitting.
std::vector<mmbal::cost::observed_step> to_steps(py::handle steps) {
  if (!py::isinstance<py::sequence>(steps) || py::isinstance<py::str>(steps))
    throw_invalid("steps: expected a sequence of (ranks, step_time) pairs, got ", std::string(py::repr(steps)));
  const auto seq = py::reinterpret_borrow<py::sequence>(steps);
  std::vector<mmbal::cost::observed_step> observed;
  observed.reserve(py::len(seq));
  for (std::size_t k = 0; k < py::len(seq); ++k) {
    const py::object pair = seq[k];
    if (!py::isinstance<py::sequence>(pair) || py::isinstance<py::str>(pair) || py::len(pair) != 2)
      throw_invalid("steps[", k, "]: expected a (ranks, step_time) pair, got ", std::string(py::repr(pair)));
    observed.push_back(to_step(pair[py::int_(0)], pair[py::int_(1)], k));
  }
  return observed;
}

/// Seconds of the C++ fit alone on already converted steps, best of `repeats` — the
/// same-run baseline of `fit_cost` in bench/python/bench_core.py.
double time_fit(py::handle steps, py::handle repeats_in) {
  const std::vector<mmbal::cost::observed_step> observed = to_steps(steps);
  const auto repeats = static_cast<int>(int_in_range(repeats_in, "repeats", 1, 1'000'000));
  py::gil_scoped_release unlocked;
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const mmbal::cost::fit_result r = mmbal::cost::fit_cost(std::span<const mmbal::cost::observed_step>(observed));
    const auto t1 = std::chrono::steady_clock::now();
    if (!(r.model.x() >= 0)) throw_invalid("time_fit: no model");
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

py::dict fit_cost(py::handle steps, py::handle temperature) {
  const std::vector<mmbal::cost::observed_step> observed = to_steps(steps);
  const mmbal::cost::fit_options o = to_fit_options(temperature);
  mmbal::cost::fit_result r;
  {
    py::gil_scoped_release unlocked;
    r = mmbal::cost::fit_cost(std::span<const mmbal::cost::observed_step>(observed), o);
  }
  return fit_dict(r);
}

/// The online refit (`cost::online_fit`): a window of the latest steps. One lock per object
/// (`fit` refits in place). The lock is taken only with the GIL released and nothing Python
/// runs under it: a thread waiting for it while holding the GIL deadlocked against one that
/// needed the GIL back (session 30). Input is converted before, the result after.
struct py_online_fit {
  mmbal::cost::online_fit core;
  std::mutex lock;
  py_online_fit(py::handle window, py::handle temperature)
      : core(static_cast<std::size_t>(int_in_range(window, "window", 1, std::uint64_t{1} << 20)),
             to_fit_options(temperature)) {}
  explicit py_online_fit(mmbal::cost::online_fit restored) : core(std::move(restored)) {}
  /// `f()` under the lock, with the GIL released (nothing Python may run in `f`).
  template <class F>
  auto locked(F&& f) {
    py::gil_scoped_release unlocked;
    const std::lock_guard<std::mutex> held(lock);
    return f();
  }
  void add_step(py::handle ranks, py::handle step_time) {
    // The index names the step in errors; a concurrent add may take it first.
    const std::uint64_t index = locked([&] { return core.steps_added(); });
    mmbal::cost::step_features step = mmbal::cost::features_of(to_step(ranks, step_time, index), index);
    locked([&] { core.add_features(std::move(step)); });
  }
  py::dict fit() {
    // A copy: a concurrent add_step refits the object's own.
    return fit_dict(locked([&] { return mmbal::cost::fit_result(core.fit()); }));
  }
};

/// A checkpoint of an OnlineFit: (window, temperature, steps added, the window's steps oldest
/// first as (step time, ranks × 3 float64 array of Σ L², Σ L, count)). O(W · ranks).
py::tuple online_fit_state(py_online_fit& f) {
  const auto [window, temperature, added, steps] = f.locked([&] {
    return std::make_tuple(f.core.window(), f.core.options().temperature, f.core.steps_added(), f.core.window_steps());
  });
  py::list saved;
  for (const mmbal::cost::step_features& st : steps) {
    py::array_t<double> features({static_cast<py::ssize_t>(st.ranks.size()), py::ssize_t{3}});
    auto v = features.mutable_unchecked<2>();
    for (std::size_t r = 0; r < st.ranks.size(); ++r) {
      v(r, 0) = st.ranks[r].sum_sq;
      v(r, 1) = st.ranks[r].sum;
      v(r, 2) = st.ranks[r].count;
    }
    saved.append(py::make_tuple(st.step_time, features));
  }
  return py::make_tuple(window, temperature, added, saved);
}

/// The OnlineFit a state of `online_fit_state` describes, validated as new input (a forged
/// state raises mmbal.Error naming the field).
std::unique_ptr<py_online_fit> online_fit_from_state(const py::tuple& state) {
  if (state.size() != 4) throw_invalid("OnlineFit: a pickled state has 4 fields, got ", state.size());
  const auto window =
      static_cast<std::size_t>(int_in_range(state[0], "OnlineFit state: window", 1, std::uint64_t{1} << 20));
  const mmbal::cost::fit_options options = to_fit_options(state[1]);
  const std::uint64_t added = int_in_range(state[2], "OnlineFit state: steps_added", 0, ~std::uint64_t{0});
  if (!py::isinstance<py::list>(state[3])) throw_invalid("OnlineFit state: steps must be a list");
  const py::list saved = state[3].cast<py::list>();
  if (saved.size() > window) throw_invalid("OnlineFit state: ", saved.size(), " steps for a window of ", window);
  std::vector<mmbal::cost::step_features> steps;
  for (std::size_t k = 0; k < saved.size(); ++k) {
    const std::string at = mmbal::detail::concat("OnlineFit state: steps[", k, "]");
    if (!py::isinstance<py::tuple>(saved[k]) || saved[k].cast<py::tuple>().size() != 2)
      throw_invalid(at, " must be a (step_time, features) pair");
    const py::tuple pair = saved[k].cast<py::tuple>();
    mmbal::cost::step_features st;
    st.step_time = number_arg(pair[0], (at + ".step_time").c_str());
    if (!py::isinstance<py::array>(pair[1])) throw_invalid(at, ".features must be a NumPy array");
    const py::array raw = pair[1].cast<py::array>();
    if (raw.ndim() != 2 || raw.shape(1) != 3 || raw.dtype().kind() != 'f' || raw.dtype().itemsize() != 8)
      throw_invalid(at, ".features must be a ranks x 3 float64 array");
    const auto features = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(raw);
    const auto v = features.unchecked<2>();
    for (py::ssize_t r = 0; r < v.shape(0); ++r) st.ranks.push_back({v(r, 0), v(r, 1), v(r, 2)});
    steps.push_back(std::move(st));
  }
  return std::make_unique<py_online_fit>(mmbal::cost::online_fit::restored(window, options, steps, added));
}

/// `should_balance` for per-rank sample lengths under a fitted cost (a `fitted:` spec).
py::dict should_balance(py::handle ranks, py::handle cost_spec, py::handle threshold) {
  const mmbal::spec::any_cost any = mmbal::spec::parse_cost(text_arg(cost_spec, "cost"));
  const auto* model = std::get_if<mmbal::cost::fitted>(&any);
  if (model == nullptr)
    throw_invalid("should_balance: cost '", text_arg(cost_spec, "cost"),
                  "' is not a fitted cost (give fitted:x=..,y=..,z=.., e.g. a fit's 'cost')");
  const std::vector<std::vector<mmbal::length_t>> lengths = per_rank_lengths(ranks, "ranks");
  mmbal::cost::trigger_options o;
  o.threshold = number_arg(threshold, "threshold");
  const mmbal::cost::trigger_decision d = mmbal::cost::should_balance(lengths, *model, o);
  py::dict out;
  out["balance"] = d.balance;
  out["reason"] = std::string(mmbal::cost::to_string(d.reason));
  out["max_load"] = d.max_load;
  out["mean_load"] = d.mean_load;
  out["largest_sample"] = d.largest_sample;
  out["imbalance"] = d.imbalance;
  out["gain_bound"] = d.gain_bound;
  out["explanation"] = d.explanation;
  return out;
}

/// Stage times from two p × m arrays of numbers (NumPy converts; the values are checked by
/// `pipeline::validate`, which names the entry as forward[s][j]).
mmbal::pipeline::stage_times to_stage_times(py::handle forward, py::handle backward) {
  // NumPy reads the input as it is first (strings, bools, None, complex numbers and masked
  // arrays would all convert to float64 silently), then a real dtype is converted.
  auto matrix = [](py::handle obj, const char* name) {
    static const py::handle masked_array = py::object(py::module_::import("numpy.ma").attr("MaskedArray")).release();
    if (py::isinstance(obj, masked_array))
      throw_invalid(name, ": a masked array (numpy.ma) is not supported; pass its .filled() values");
    py::array raw;
    try {
      raw = py::module_::import("numpy").attr("asarray")(obj);
    } catch (py::error_already_set&) {
      throw_invalid(name, ": expected a stages x micro-batches array of times, got ", std::string(py::repr(obj)));
    }
    const char kind = raw.dtype().kind();
    if (kind != 'f' && kind != 'i' && kind != 'u')
      throw_invalid(name, ": expected real numbers, got dtype ", std::string(py::str(raw.dtype())));
    if (raw.ndim() != 2 || raw.shape(0) == 0 || raw.shape(1) == 0)
      throw_invalid(name, ": expected a non-empty 2-D array (stages x micro-batches), got shape ",
                    std::string(py::str(py::tuple(raw.attr("shape")))));
    return py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(raw);
  };
  const auto f = matrix(forward, "forward"), b = matrix(backward, "backward");
  if (f.shape(0) != b.shape(0) || f.shape(1) != b.shape(1))
    throw_invalid("forward is ", f.shape(0), " x ", f.shape(1), " but backward is ", b.shape(0), " x ", b.shape(1));
  if (static_cast<std::uint64_t>(f.shape(0)) > u32_max || static_cast<std::uint64_t>(f.shape(1)) > u32_max)
    throw_invalid("forward: ", f.shape(0), " x ", f.shape(1), " exceeds 2^32 - 1 stages or micro-batches");
  mmbal::pipeline::stage_times t(static_cast<std::uint32_t>(f.shape(0)), static_cast<std::uint32_t>(f.shape(1)));
  std::copy(f.data(), f.data() + f.size(), t.forward.begin());
  std::copy(b.data(), b.data() + b.size(), t.backward.begin());
  mmbal::pipeline::validate(t);
  return t;
}

/// Every order of `orders` (names) with its makespan, the best (first on ties) and the lower
/// bound of every order, under `schedule` and `hop`. The GIL is released while searching.
py::dict pipeline_orders(py::handle forward, py::handle backward, py::handle orders, py::handle schedule_spec,
                         py::handle hop_in, py::handle max_evaluations, py::handle seed) {
  const mmbal::pipeline::stage_times t = to_stage_times(forward, backward);
  std::vector<mmbal::pipeline::order_kind> kinds;
  if (!py::isinstance<py::sequence>(orders) || py::isinstance<py::str>(orders))
    throw_invalid("orders: expected a sequence of order names, got ", std::string(py::repr(orders)));
  const auto names = py::reinterpret_borrow<py::sequence>(orders);
  for (std::size_t k = 0; k < py::len(names); ++k)
    kinds.push_back(mmbal::spec::parse_order_kind(text_arg(names[k], "orders[" + std::to_string(k) + "]")));
  if (kinds.empty()) throw_invalid("orders: empty (give at least one of identity, verl, disttrain, search)");
  const mmbal::pipeline::schedule sched = mmbal::spec::parse_schedule(text_arg(schedule_spec, "schedule"));
  const double hop = number_arg(hop_in, "hop");
  mmbal::pipeline::search_options o;
  o.max_evaluations = int_in_range(max_evaluations, "max_evaluations", 0, std::uint64_t{1} << 32);
  o.seed = int_in_range(seed, "seed", 0, std::numeric_limits<std::uint64_t>::max());
  std::vector<mmbal::pipeline::order_report> reports;
  double lower = 0;
  {
    py::gil_scoped_release unlocked;
    reports = mmbal::pipeline::compute_orders(t, kinds, sched, hop, o);
    lower = mmbal::pipeline::lower_bound(t, sched, hop);
  }
  py::dict by_name;
  std::size_t best = 0;
  for (std::size_t k = 0; k < reports.size(); ++k) {
    std::vector<std::int64_t> order(reports[k].order.begin(), reports[k].order.end());
    by_name[py::str(std::string(mmbal::pipeline::to_string(reports[k].kind)))] =
        py::make_tuple(read_only(to_numpy(std::move(order))), reports[k].makespan);
    if (reports[k].makespan < reports[best].makespan) best = k;
  }
  py::dict out;
  out["orders"] = by_name;
  out["best"] = std::string(mmbal::pipeline::to_string(reports[best].kind));
  // Both sum the same times in different orders: rounding could put the bound an ulp above the
  // best makespan (the tool clamps it the same way).
  out["lower_bound"] = std::min(lower, reports[best].makespan);
  out["stages"] = t.stages;
  out["micro_batches"] = t.micro_batches;
  out["schedule"] = mmbal::pipeline::to_spec(sched);
  return out;
}

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

  m.attr("max_ranks") = mmbal::max_ranks;

  m.def("balance", &balance, py::arg("lengths"), py::arg("ranks"), py::arg("algorithm"), py::arg("cost"),
        py::arg("origin"), py::arg("count_cap"), py::arg("capacity"), py::arg("groups"), py::arg("bytes"),
        py::arg("ranks_per_node"),
        "Balances items of `lengths` over `ranks` ranks with `balance::solve`; returns (rank, slot, loads, "
        "lower_bound). See mmbal.balance.");
  m.def("balanced_partitions", &balanced_partitions, py::arg("seqlen_list"), py::arg("k_partitions"),
        py::arg("equal_size"), py::arg("refine") = true,
        "See mmbal.balanced_partitions; refine=False returns the Karmarkar-Karp result alone.");
  m.def("time_balance", &time_balance, py::arg("lengths"), py::arg("ranks"), py::arg("algorithm"), py::arg("cost"),
        py::arg("repeats"), "Best-of-`repeats` seconds of the C++ work of balance (benchmark baseline).");
  m.def(
      "validate_assignment",
      [](py::handle rank, py::handle slot, py::handle ranks) {
        (void)to_assignment(rank, slot, rank_count(ranks, "ranks"), "assignment");
      },
      py::arg("rank"), py::arg("slot"), py::arg("ranks"),
      "Raises mmbal.Error unless every rank < ranks and each rank's slots are 0..k-1, each once.");
  m.def(
      "as_index", [](py::handle value, py::handle name) { return as_index(value, text_arg(name, "name").c_str()); },
      py::arg("value"), py::arg("name"),
      "An int argument through operator.index (NumPy integers too; not a bool, float, str or array); "
      "else mmbal.Error naming `name`.");
  m.def(
      "as_flag", [](py::handle value, py::handle name) { return as_flag(value, text_arg(name, "name").c_str()); },
      py::arg("value"), py::arg("name"),
      "A flag argument: Python's or NumPy's bool (a 0-d bool array or tensor too), or the int 0 or 1; "
      "else mmbal.Error naming `name`.");
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
      .def_property_readonly(
          "send_splits", [](const py_plan& p) { return py::list(p.send_splits); },
          "Rows sent to each peer (a new list[int] per access, one per rank).")
      .def_property_readonly(
          "recv_splits", [](const py_plan& p) { return py::list(p.recv_splits); },
          "Rows received from each peer (a new list[int] per access, one per rank).")
      .def_readonly("source_rows", &py_plan::source_rows, "Rows of the local input (= sum(send_splits)).")
      .def_readonly("dest_rows", &py_plan::dest_rows, "Rows of the local output (= sum(recv_splits)).")
      .def_readonly("send_items", &py_plan::send_items,
                    "int64 (read-only, as every index array of the plan): source slot of each item in pack order.")
      .def_readonly("recv_items", &py_plan::recv_items, "int64: destination slot of each item in arrival order.")
      .def_readonly("pack_index", &py_plan::pack_index, "int64, source_rows entries: send_buffer = x[pack_index].")
      .def_readonly("unpack_index", &py_plan::unpack_index,
                    "int64, dest_rows entries: output = recv_buffer[unpack_index] (destination slot order).")
      .def_readonly("fingerprint", &py_plan::fingerprint,
                    "64-bit hash of the global plan (every item's locations and size); equal on every rank.")
      .def(
          "check",
          [](const py_plan& p, py::handle rank, py::handle rows) {
            const mmbal::rank_t r = rank_index(rank, "rank", u32_max);
            if (r != p.rank)
              throw_invalid("AllToAllPlan: made for rank ", p.rank, " of ", p.ranks, " but used on rank ", r);
            const std::uint64_t n = int_in_range(rows, "rows", 0, std::numeric_limits<std::uint64_t>::max());
            if (n != p.source_rows)
              throw_invalid("AllToAllPlan: the input has ", n, " rows but the plan for rank ", p.rank,
                            " expects source_rows = ", p.source_rows);
          },
          py::arg("rank"), py::arg("rows"),
          "Raises mmbal.Error unless this plan is for `rank` and an input of `rows` rows matches it "
          "(rows == source_rows). Call it before any collective.")
      .def("inverse", &py_plan::inverse,
           "The plan (for the same rank) that moves every item back: its input is this plan's output.")
      .def(py::pickle(&plan_state, &plan_from_state))
      .def("__repr__", [](const py_plan& p) {
        return mmbal::detail::concat("AllToAllPlan(rank=", p.rank, ", ranks=", p.ranks, ", source_rows=", p.source_rows,
                                     ", dest_rows=", p.dest_rows, ", fingerprint=", p.fingerprint, ")");
      });
  m.def("alltoall_plan", &alltoall_plan, py::arg("source_rank"), py::arg("target_rank"), py::arg("target_slot"),
        py::arg("target_ranks"), py::arg("sizes"), py::arg("rank"),
        "The AllToAllPlan of `rank` moving item i from rank source_rank[i] (slots in ascending i) to "
        "(target_rank[i], target_slot[i]); sizes[i] rows each.");

  py::class_<py_workload, std::shared_ptr<py_workload>>(m, "Workload", R"doc(A global batch from flat arrays.

Workload(sample_rank, segment_sample, segment_modality, segment_tokens, segment_encoder_len=None,
         sample_group=None)
- sample_rank[s]: the rank that holds sample s now (samples in the gathered, rank-major order);
- per segment k (listed sample by sample, each sample's segments in sequence order):
  segment_sample[k] its sample (non-decreasing), segment_modality[k] its modality name ("text"
  or an encoder modality such as "image"), segment_tokens[k] its length in LLM tokens,
  segment_encoder_len[k] its encoder length (patches, frames; default: segment_tokens);
- sample_group[s]: optional group id (< 2^63); policies with keep_groups keep a group together;
- modalities: optional list of names; then segment_modality holds integer ids into it (no
  Python string per segment: the fast form for large gathered batches).
Raises mmbal.Error on bad lengths, out-of-order segments, unknown types. O(samples + segments).)doc")
      .def(py::init<py::handle, py::handle, py::handle, py::handle, py::handle, py::handle, py::handle>(),
           py::arg("sample_rank"), py::arg("segment_sample"), py::arg("segment_modality"), py::arg("segment_tokens"),
           py::arg("segment_encoder_len") = py::none(), py::arg("sample_group") = py::none(),
           py::arg("modalities") = py::none())
      .def_property_readonly("samples", [](const py_workload& w) { return w.w.samples.size(); })
      .def_property_readonly("segments", [](const py_workload& w) { return w.first_segment.back(); })
      .def_property_readonly(
          "modalities", [](const py_workload& w) { return w.w.modalities; }, "Modality names; [0] is always 'text'.")
      .def(py::pickle(&workload_state, &workload_from_state));

  py::class_<py_orchestration>(m, "Orchestration", R"doc(One training step's plans (from Orchestrator.plan).

Phases: encoder modalities with at least one segment (in order of first appearance in the
workload), then "llm" (last). Items: for "llm" the samples (weight = the sample's total LLM
tokens); for an encoder phase that modality's segments in workload order (weight = encoder
length). Source layout of every phase: on each rank its items in ascending item id.)doc")
      .def_property_readonly("phases", &py_orchestration::phases)
      .def_property_readonly(
          "fingerprint", [](const py_orchestration& o) { return o.plan->fingerprint; },
          "Hash of every phase's and composed plan's layouts, sizes and policies; equal on every rank.")
      .def_property_readonly("ranks", [](const py_orchestration& o) { return o.plan->ranks; })
      .def_property_readonly("composed_bytes", [](const py_orchestration& o) { return o.plan->composed_bytes; })
      .def_property_readonly("two_hop_bytes", [](const py_orchestration& o) { return o.plan->two_hop_bytes; })
      .def("items", &py_orchestration::items, py::arg("phase"),
           "(sample, segment, length) int64 arrays per item of `phase`; segment = the item's row in the workload's "
           "segment arrays (-1 for 'llm').")
      .def("target", &py_orchestration::target, py::arg("phase"),
           "(origin, rank, slot, loads, lower_bound, cost) of `phase` after balancing and relabeling.")
      .def("composed_layout", &py_orchestration::composed_layout, py::arg("modality"),
           "(source_rank, source_slot, target_rank, target_slot) per segment of the composed encoder->LLM plan.")
      .def("report", &py_orchestration::report, py::arg("phase"))
      .def("phase_plan", &py_orchestration::phase_plan, py::arg("phase"), py::arg("rank"),
           py::arg("sizes") = py::none(), "Forward AllToAllPlan of `phase` for `rank`; sizes[i] rows for item i.")
      .def("composed_plan", &py_orchestration::composed_plan, py::arg("modality"), py::arg("rank"),
           py::arg("sizes") = py::none(), "Composed encoder->LLM AllToAllPlan of `modality` for `rank`.");

  m.def("fit_cost", &fit_cost, py::arg("steps"), py::arg("temperature"),
        "Fits c(L) = x L^2 + y L + z to measured steps (cost::fit_cost). See mmbal.fit_cost.");
  m.def("time_fit", &time_fit, py::arg("steps"), py::arg("repeats"),
        "Best-of-`repeats` seconds of the C++ fit alone on converted steps (benchmark baseline).");
  py::class_<py_online_fit>(m, "OnlineFit", "The online refit over a window of steps (see mmbal.OnlineFit).")
      .def(py::init<py::handle, py::handle>(), py::arg("window"), py::arg("temperature"))
      .def("add_step", &py_online_fit::add_step, py::arg("ranks"), py::arg("step_time"))
      .def("fit", &py_online_fit::fit)
      .def_property_readonly("window", [](py_online_fit& f) { return f.locked([&] { return f.core.window(); }); })
      .def_property_readonly("size", [](py_online_fit& f) { return f.locked([&] { return f.core.size(); }); })
      .def_property_readonly("steps_added",
                             [](py_online_fit& f) { return f.locked([&] { return f.core.steps_added(); }); })
      .def(py::pickle(&online_fit_state, &online_fit_from_state));
  m.def("should_balance", &should_balance, py::arg("ranks"), py::arg("cost"), py::arg("threshold"),
        "LoongForge's trigger (cost::should_balance). See mmbal.should_balance.");
  m.def("pipeline_orders", &pipeline_orders, py::arg("forward"), py::arg("backward"), py::arg("orders"),
        py::arg("schedule"), py::arg("hop"), py::arg("max_evaluations"), py::arg("seed"),
        "Micro-batch orders and their simulated makespans (pipeline::compute_orders). See mmbal.pipeline_orders.");
  m.def("isf", &isf, py::arg("vision"), py::arg("text"), py::arg("qv"), py::arg("qt"), py::arg("qv_target"),
        py::arg("qt_target"), py::arg("iterations"), py::arg("seed"), py::arg("oversize"), py::arg("drop_unfilled"),
        py::arg("sort_tail"), "OmniBal ISF; returns (members, offsets, singletons, dropped, stats). See mmbal.isf.");
  m.def("distribute_tokens", &distribute_tokens, py::arg("block_workloads"), py::arg("tokens"), py::arg("ranks"),
        py::arg("block"), py::arg("distributor"), py::arg("seed"),
        "Context-parallel token distribution; returns a dict. See mmbal.distribute_tokens.");

  py::class_<py_mask>(m, "BitfieldMask", R"doc(A bitfield attention mask over a packed sequence of T tokens.

Token t has a 64-bit pattern bits[t] (bit 0 text, bits 1..61 modality, bit 62 causal) and a
document id documents[t] (non-decreasing); tokens of different documents never attend. Build it
with mmbal.bitfield_mask(workload, ...) or BitfieldMask.from_bits(bits, documents).
@see Cornstarch 4.3.1.)doc")
      .def_static("from_bits", &mask_from_bits, py::arg("bits"), py::arg("documents"),
                  "A mask from per-token bit patterns and document ids (validated).")
      .def(py::pickle([](const py_mask& m) { return py::make_tuple(m.bits(), m.documents()); },
                      [](const py::tuple& state) {
                        if (state.size() != 2)
                          throw_invalid("BitfieldMask: a pickled state has 2 fields, got ", state.size());
                        return mask_from_bits(state[0], state[1]);
                      }))
      .def_property_readonly("size", [](const py_mask& m) { return m.mask.size(); })
      .def_property_readonly("document_count", [](const py_mask& m) { return m.mask.document_count(); })
      .def_property_readonly("bits", &py_mask::bits, "uint64 per token.")
      .def_property_readonly("documents", &py_mask::documents, "int64 document id per token.")
      .def(
          "attends",
          [](const py_mask& m, py::handle q, py::handle k) {
            return m.mask.attends(rank_index(q, "q", m.mask.size()), rank_index(k, "k", m.mask.size()));
          },
          py::arg("q"), py::arg("k"), "Whether query token q attends key token k.")
      .def("token_workloads", &py_mask::token_workloads, "int64 per token: keys it attends (row sums).")
      .def("block_workloads", &py_mask::block_workloads, py::arg("block") = 128,
           "int64 per block of `block` tokens: attended pairs of its queries (exact, no dense mask).")
      .def("dense", &py_mask::dense, "The T x T bool matrix (row = query); T <= 32768.")
      .def(
          "__eq__",
          [](const py_mask& a, py::handle b) -> py::object {
            if (!py::isinstance<py_mask>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            return py::bool_(a.mask == b.cast<const py_mask&>().mask);
          },
          py::is_operator(), "Equal bits and documents (by value; masks are immutable, so they also hash by value).")
      .def(
          "__hash__",
          [](const py_mask& m) {
            return py::hash(py::make_tuple(m.mask.size(), py::bytes(reinterpret_cast<const char*>(m.mask.bits().data()),
                                                                    m.mask.size() * sizeof(std::uint64_t))));
          })
      .def("block_mask", &py_mask::block_mask, py::arg("q_block") = 128, py::arg("kv_block") = 128,
           "FlexAttention BlockMask arrays (int32, batch and head dims of 1): kv_num_blocks (1,1,Q), kv_indices "
           "(1,1,Q,K), full_kv_num_blocks, full_kv_indices, q_num_blocks (1,1,K), q_indices (1,1,K,Q), "
           "full_q_num_blocks, full_q_indices; plus block_size and seq_lengths.");
  m.def("bitfield_mask", &mask_of_workload, py::arg("workload"), py::arg("samples"), py::arg("assign"),
        py::arg("layout"), "The mask of the workload's samples packed as documents. See mmbal.bitfield_mask.");

  py::class_<py_orchestrator>(m, "Orchestrator", "The multi-phase orchestrator (see mmbal.Orchestrator).")
      .def(py::init<py::handle, py::handle, py::handle, py::handle, py::handle, py::handle>(), py::arg("ranks"),
           py::arg("ranks_per_node"), py::arg("policies"), py::arg("threads"), py::arg("bytes_per_token"),
           py::arg("relabel"))
      .def("plan", &py_orchestrator::plan, py::arg("workload"))
      .def(
          "policy",
          [](const py_orchestrator& o, py::handle phase) {
            const auto p = o.core.policy(text_arg(phase, "phase"));
            return py::make_tuple(p.balancer.cost_name(), p.balancer.name());
          },
          py::arg("phase"));
}
