#pragma once
/// @file
/// Batch-length functions (docs/DESIGN.md §4 table). Each is a `batch_cost` over `batch_stats`.
/// Every value is a double computed in a fixed order, so it is identical on every rank. Each
/// cost names itself (`name()`: its canonical spec, which `spec::parse_cost` reads back).
/// @see OrchMLLM §5.1 eq. (1)–(2) and appendix A; LoongForge §2.1.

#include <mmbal/core/concepts.hpp>
#include <mmbal/cost/batch_stats.hpp>
#include <mmbal/cost/validate.hpp>

#include <cstdint>
#include <string>

namespace mmbal::cost {

/// Shared plumbing: the state type and `empty`/`add`.
struct stats_cost_base {
  using state = batch_stats;
  [[nodiscard]] constexpr state empty() const noexcept { return {}; }
  [[nodiscard]] constexpr state add(const state& s, length_t l) const noexcept { return s.plus(l); }
};

/// `tokens`: Σ l — packed batches without padding whose compute is linear in length.
/// Additive. @see OrchMLLM eq. (1).
struct tokens : stats_cost_base {
  [[nodiscard]] double value(const state& s) const noexcept { return static_cast<double>(s.sum); }
  [[nodiscard]] double item(length_t l) const noexcept { return static_cast<double>(l); }
  /// The canonical spec (docs/DESIGN.md §6), as reports and fingerprints show the cost.
  [[nodiscard]] std::string name() const { return "tokens"; }
};

/// `padded`: b · max l — a batch padded to its longest item. @see OrchMLLM eq. (2), Alg. 2.
struct padded : stats_cost_base {
  [[nodiscard]] double value(const state& s) const noexcept { return padded_value(s.count, s.max); }
  [[nodiscard]] double padded_value(std::uint64_t count, length_t max_length) const noexcept {
    return static_cast<double>(count) * static_cast<double>(max_length);
  }
  [[nodiscard]] std::string name() const { return "padded"; }
};

/// `attention{alpha, beta}`: α Σl + β Σl² — unpadded Transformer, linear layers plus
/// attention. Defaults α = 1, β = 0. Additive. @see OrchMLLM appendix A (eq. 5).
class attention : public stats_cost_base {
 public:
  explicit attention(double alpha = 1.0, double beta = 0.0)
      : alpha_(detail::non_negative_parameter("attention", "alpha", alpha)),
        beta_(detail::non_negative_parameter("attention", "beta", beta)) {}
  [[nodiscard]] double value(const state& s) const noexcept {
    return alpha_ * static_cast<double>(s.sum) + beta_ * s.sum_sq;
  }
  [[nodiscard]] double item(length_t l) const noexcept {
    const double dl = l;
    return alpha_ * dl + beta_ * (dl * dl);
  }
  [[nodiscard]] double alpha() const noexcept { return alpha_; }
  [[nodiscard]] double beta() const noexcept { return beta_; }
  [[nodiscard]] std::string name() const { return detail::concat("attention:alpha=", alpha_, ",beta=", beta_); }

 private:
  double alpha_, beta_;
};

/// `padded_attention{alpha, beta}`: α·L + (β / b)·L² with L = b · max l — a padded
/// Transformer batch (b sequences of the padded length). Defaults α = 1, β = 0.
/// @see OrchMLLM appendix A (eq. 6).
class padded_attention : public stats_cost_base {
 public:
  explicit padded_attention(double alpha = 1.0, double beta = 0.0)
      : alpha_(detail::non_negative_parameter("padded_attention", "alpha", alpha)),
        beta_(detail::non_negative_parameter("padded_attention", "beta", beta)) {}
  [[nodiscard]] double value(const state& s) const noexcept { return padded_value(s.count, s.max); }
  [[nodiscard]] double padded_value(std::uint64_t count, length_t max_length) const noexcept {
    if (count == 0) return 0.0;
    const double b = static_cast<double>(count);
    const double total = b * static_cast<double>(max_length);
    return alpha_ * total + (beta_ / b) * (total * total);
  }
  [[nodiscard]] double alpha() const noexcept { return alpha_; }
  [[nodiscard]] double beta() const noexcept { return beta_; }
  [[nodiscard]] std::string name() const { return detail::concat("padded-attention:alpha=", alpha_, ",beta=", beta_); }

 private:
  double alpha_, beta_;
};

/// `conv_attention{lambda}`: Σl + λ · b · (max l)² — a ConvTransformer encoder (e.g. Whisper)
/// whose convolution runs on unpadded frames and whose attention is padded.
/// Default λ = 0. @see OrchMLLM appendix A, Alg. 5.
class conv_attention : public stats_cost_base {
 public:
  explicit conv_attention(double lambda = 0.0)
      : lambda_(detail::non_negative_parameter("conv_attention", "lambda", lambda)) {}
  [[nodiscard]] double value(const state& s) const noexcept {
    const double m = s.max;
    return static_cast<double>(s.sum) + lambda_ * static_cast<double>(s.count) * (m * m);
  }
  [[nodiscard]] double lambda() const noexcept { return lambda_; }
  [[nodiscard]] std::string name() const { return detail::concat("conv:lambda=", lambda_); }

 private:
  double lambda_;
};

/// `fitted{x, y, z}`: x Σl² + y Σl + z · b — LoongForge's cost model fitted from profiles
/// (quadratic attention term, linear term, per-sample overhead). Defaults x = 0, y = 1, z = 0.
/// Additive (per item: x l² + y l + z). @see LoongForge §2.1.
class fitted : public stats_cost_base {
 public:
  explicit fitted(double x = 0.0, double y = 1.0, double z = 0.0)
      : x_(detail::non_negative_parameter("fitted", "x", x)),
        y_(detail::non_negative_parameter("fitted", "y", y)),
        z_(detail::non_negative_parameter("fitted", "z", z)) {}
  [[nodiscard]] double value(const state& s) const noexcept {
    return x_ * s.sum_sq + y_ * static_cast<double>(s.sum) + z_ * static_cast<double>(s.count);
  }
  [[nodiscard]] double item(length_t l) const noexcept {
    const double dl = l;
    return x_ * (dl * dl) + y_ * dl + z_;
  }
  [[nodiscard]] double x() const noexcept { return x_; }
  [[nodiscard]] double y() const noexcept { return y_; }
  [[nodiscard]] double z() const noexcept { return z_; }
  [[nodiscard]] std::string name() const { return detail::concat("fitted:x=", x_, ",y=", y_, ",z=", z_); }

 private:
  double x_, y_, z_;
};

/// A Transformer's shape, for `flops`.
struct model_config {
  std::uint64_t hidden = 4096;  ///< h, model width
  std::uint64_t ffn = 11008;    ///< f, MLP inner width
  std::uint64_t heads = 32;     ///< attention heads
  std::uint64_t kv_heads = 32;  ///< key/value heads (grouped-query attention when < heads)
  std::uint64_t layers = 32;    ///< L, Transformer layers
  bool causal = true;           ///< causal attention computes half of the score matrix
  bool gated_mlp = true;        ///< SwiGLU-style MLP with three matrices (else two)
  bool backward = true;         ///< count forward + backward (3×) instead of forward only
};

/// `flops{model}`: training FLOPs of a batch, α Σl + β Σl² with α, β derived from the model:
///
///     h_kv = h · kv_heads / heads
///     α = k · L · (2h·(h + 2 h_kv) + 2h² + m · 2h·f)      (QKV, output projection, MLP)
///     β = k · L · 4h · c                                  (QKᵀ and AV: 2·2·h per key)
///
/// with m = 3 for a gated MLP (else 2), c = 1/2 when causal (else 1), and k = 3 with the
/// backward pass (else 1). Defaults: a Llama-2-7B-like shape. Additive.
/// @see OrchMLLM appendix A; DistTrain §5 (FLOPs-based cost).
class flops : public stats_cost_base {
 public:
  explicit flops(const model_config& m = {}) : model_(m), attention_(derive(m)) {}
  [[nodiscard]] double value(const state& s) const noexcept { return attention_.value(s); }
  [[nodiscard]] double item(length_t l) const noexcept { return attention_.item(l); }
  [[nodiscard]] const model_config& model() const noexcept { return model_; }
  /// The equivalent `attention` cost (α, β as derived above).
  [[nodiscard]] const attention& as_attention() const noexcept { return attention_; }
  [[nodiscard]] std::string name() const {
    const model_config& m = model_;
    return detail::concat("flops:hidden=", m.hidden, ",ffn=", m.ffn, ",heads=", m.heads, ",kv_heads=", m.kv_heads,
                          ",layers=", m.layers, ",causal=", m.causal ? "true" : "false",
                          ",gated=", m.gated_mlp ? "true" : "false", ",backward=", m.backward ? "true" : "false");
  }

 private:
  static attention derive(const model_config& m) {
    if (m.hidden == 0 || m.heads == 0 || m.kv_heads == 0 || m.layers == 0 || m.ffn == 0)
      detail::throw_invalid("flops: hidden, ffn, heads, kv_heads and layers must be > 0 (got hidden=", m.hidden,
                            ", ffn=", m.ffn, ", heads=", m.heads, ", kv_heads=", m.kv_heads, ", layers=", m.layers,
                            ")");
    if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0)
      detail::throw_invalid("flops: kv_heads = ", m.kv_heads, " must divide heads = ", m.heads);
    if (m.hidden % m.heads != 0) detail::throw_invalid("flops: heads = ", m.heads, " must divide hidden = ", m.hidden);
    const double h = static_cast<double>(m.hidden);
    const double h_kv = h * static_cast<double>(m.kv_heads) / static_cast<double>(m.heads);
    const double f = static_cast<double>(m.ffn);
    const double layers = static_cast<double>(m.layers);
    const double k = m.backward ? 3.0 : 1.0;
    const double mlp_matrices = m.gated_mlp ? 3.0 : 2.0;
    const double alpha = k * layers * (2 * h * (h + 2 * h_kv) + 2 * h * h + mlp_matrices * 2 * h * f);
    const double beta = k * layers * 4 * h * (m.causal ? 0.5 : 1.0);
    return attention{alpha, beta};
  }
  model_config model_;
  attention attention_;
};

static_assert(additive_cost<tokens> && padded_cost<padded> && additive_cost<attention> &&
              padded_cost<padded_attention> && batch_cost<conv_attention> && additive_cost<fitted> &&
              additive_cost<flops>);

}  // namespace mmbal::cost
