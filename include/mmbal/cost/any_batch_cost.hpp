#pragma once
/// @file
/// `any_batch_cost`: any `batch_cost` behind one interface, for data that holds a cost chosen
/// at run time (a pipeline module's cost, docs/DESIGN.md §5.7). Algorithms take the typed cost.

#include <mmbal/core/concepts.hpp>
#include <mmbal/core/types.hpp>
#include <mmbal/cost/functions.hpp>

#include <concepts>
#include <memory>
#include <span>
#include <string>
#include <utility>

namespace mmbal::cost {

/// Any `batch_cost` (default `tokens`), type-erased: `batch(lengths)` folds the lengths in
/// order into the held cost's state and returns its value, O(n) plus one indirect call.
/// Immutable and cheap to copy (shared state).
class any_batch_cost {
 public:
  any_batch_cost() : any_batch_cost(tokens{}) {}

  /// Holds a copy of `c` (implicit, so any cost converts). Not a copy constructor: checking
  /// `batch_cost<any_batch_cost>` would ask whether any_batch_cost is copyable, i.e. recurse.
  template <class C>
  requires(!std::same_as<C, any_batch_cost> && batch_cost<C>)
      any_batch_cost(C c)  // NOLINT(google-explicit-constructor)
      : model_(std::make_shared<const typed<C>>(std::move(c))) {}

  /// The held cost of one batch of items of these lengths.
  [[nodiscard]] double batch(std::span<const length_t> lengths) const { return model_->batch(lengths); }

 private:
  struct model {
    virtual ~model() = default;
    [[nodiscard]] virtual double batch(std::span<const length_t> lengths) const = 0;
  };
  template <class C>
  struct typed final : model {
    C cost;
    explicit typed(C c) : cost(std::move(c)) {}
    [[nodiscard]] double batch(std::span<const length_t> lengths) const override {
      auto state = cost.empty();
      for (const length_t l : lengths) state = cost.add(state, l);
      return static_cast<double>(cost.value(state));
    }
  };
  std::shared_ptr<const model> model_;
};

}  // namespace mmbal::cost
