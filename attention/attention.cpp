#include "attention/attention.h"

#include "attention/fused_cpu.h"
#include "attention/learned_bias.h"
#include "attention/reference.h"

#ifdef HARNESS_WITH_CUDA_KERNEL
#include "attention/cuda/binding.h"
#endif

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

namespace attention {

namespace {

constexpr bool kHaveCudaKernel =
#ifdef HARNESS_WITH_CUDA_KERNEL
    true;
#else
    false;
#endif

[[noreturn]] void no_cuda_kernel() {
  throw std::invalid_argument(
      "attention: kernel 'cuda' (or 'fused' on CUDA tensors) requested, but this build has no CUDA "
      "kernel (LibTorch without CUDA, or built without HARNESS_WITH_CUDA_KERNEL); use kernel "
      "'fused' (CPU tensors) or 'reference'");
}

// The raw scores s = scale·q·k over a fixed sample of causal pairs (see attention.h), computed
// where q and k live: their std, and their count, sum and sum of squares added to the probe's.
void sample_score_std(const torch::Tensor& q, const torch::Tensor& k, double scale, AttentionProbe& probe) {
  torch::NoGradGuard no_grad;
  constexpr int64_t kMaxPairs = 4096;
  const int64_t T = q.size(2);
  const int64_t total = T * (T + 1) / 2;
  std::vector<int64_t> I, J;
  if (total <= kMaxPairs) {
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) I.push_back(i), J.push_back(j);
  } else {
    std::mt19937_64 rng(0x5C0DE5EEDull ^ uint64_t(T));  // fixed: the same pairs every call
    std::uniform_int_distribution<int64_t> pick(0, total - 1);
    for (int64_t s = 0; s < kMaxPairs; ++s) {
      const int64_t u = pick(rng);  // pair index in row-major order of the lower triangle
      int64_t i = int64_t((std::sqrt(8.0 * double(u) + 1.0) - 1.0) / 2.0);
      while (i * (i + 1) / 2 > u) --i;
      while ((i + 1) * (i + 2) / 2 <= u) ++i;
      I.push_back(i), J.push_back(u - i * (i + 1) / 2);
    }
  }
  const auto idx = torch::TensorOptions().dtype(torch::kLong);
  const auto rows_i = torch::tensor(I, idx).to(q.device()), rows_j = torch::tensor(J, idx).to(q.device());
  // A few windows at a time: the float64 gathers of a whole batch are (B, H, S, D) — 0.5 GB each
  // for 256 windows of 64 tokens — and made large validation batches ~25× slower per token.
  const int64_t per_window = q.size(1) * int64_t(I.size()) * q.size(3);
  const int64_t step = std::max<int64_t>(1, (int64_t(1) << 21) / std::max<int64_t>(per_window, 1));
  std::vector<torch::Tensor> parts;
  for (int64_t b = 0; b < q.size(0); b += step) {
    const int64_t n = std::min(step, q.size(0) - b);
    const auto qi = q.narrow(0, b, n).index_select(2, rows_i).to(torch::kFloat64);
    const auto kj = k.narrow(0, b, n).index_select(2, rows_j).to(torch::kFloat64);
    parts.push_back((qi * kj).sum(-1) * scale);
  }
  const auto s = torch::cat(parts, 0);  // (B, H, S)
  // One transfer: std, sum, sum of squares.
  const auto stats = torch::stack({s.numel() > 1 ? s.std() : torch::zeros({}, s.options()), s.sum(),
                                   s.square().sum()}).to(torch::kCPU);
  const auto* v = stats.data_ptr<double>();
  probe.score_std_value = v[0];
  probe.score_count += double(s.numel());
  probe.score_sum += v[1];
  probe.score_sum_sq += v[2];
}

bool reduced(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf;
}

}  // namespace

CausalAttentionImpl::CausalAttentionImpl(MethodOptions options)
    : options_(std::move(options)), method_(resolve_method(options_)) {
  if (method_.kernel == Kernel::kCuda && !kHaveCudaKernel) no_cuda_kernel();
  if (method_.learned_head_scale())
    logn_scale = register_parameter(
        "logn_scale", torch::full({method_.heads}, initial_head_scale(method_), torch::kFloat32));
  alibi_slopes_ = alibi_slope_tensor(method_);
  const auto& spec = transform_spec(method_.transform);
  const int64_t H = method_.heads, P = learned_values_per_head(method_);
  const torch::Tensor initial =  // (H, P)
      torch::tensor(initial_learned_values(method_), torch::kFloat64).view({H, P});
  int64_t column = 0;
  for (const auto& p : spec.learned) {
    auto value = initial.narrow(1, column, p.per_head).to(torch::kFloat32).contiguous();
    learned_bias_params.push_back(register_parameter(p.name, p.per_head == 1 ? value.view({H}) : value));
    column += p.per_head;
  }
}

torch::Tensor CausalAttentionImpl::bias_table(int64_t T) const {
  return learned_bias_table(method_, learned_bias_params, T);
}

RotaryTables CausalAttentionImpl::cached_rotary_tables(int64_t context,
                                                      const torch::TensorOptions& options) const {
  // The training context's tables are kept (keyed by device and dtype): every step reuses them.
  // Validation contexts (up to 16L, per layer) are built per forward rather than held all run.
  if (context != options_.train_context) return rotary_tables(method_, context, options);
  const std::string key = std::to_string(context) + "/" + options.device().str() + "/" +
                          std::string(c10::toString(c10::typeMetaToScalarType(options.dtype())));
  auto found = rotary_cache_.find(key);
  if (found != rotary_cache_.end()) return found->second;
  if (rotary_cache_.size() >= 4) rotary_cache_.clear();  // bounded: a device or two, a dtype or two
  return rotary_cache_.emplace(key, rotary_tables(method_, context, options)).first->second;
}

namespace {
// Rotates x by `tables`; reduced-precision x is rotated in float32 and cast back (the tables
// are float32 then), as mixed precision keeps position arithmetic out of bfloat16.
torch::Tensor rotate_one(const torch::Tensor& x, const RotaryTables& tables) {
  if (reduced(x)) return apply_rotary_fused(x.to(torch::kFloat), tables).to(x.scalar_type());
  return apply_rotary_fused(x, tables);
}
torch::TensorOptions table_options(const torch::Tensor& x) {
  return x.options().dtype(reduced(x) ? torch::kFloat : x.scalar_type());
}
}  // namespace

std::pair<torch::Tensor, torch::Tensor> CausalAttentionImpl::rotate(const torch::Tensor& q,
                                                                    const torch::Tensor& k) const {
  if (!method_.rotary()) return {q, k};
  const RotaryTables tables = cached_rotary_tables(q.size(2), table_options(q));
  return {rotate_one(q, tables), rotate_one(k, tables)};
}

std::pair<torch::Tensor, torch::Tensor> CausalAttentionImpl::rotate_rows(
    const torch::Tensor& q, const torch::Tensor& k, int64_t start, int64_t context) const {
  if (!method_.rotary()) return {q, k};
  const RotaryTables all = cached_rotary_tables(context, table_options(q));
  const RotaryTables rows{all.cos.narrow(0, start, q.size(2)).contiguous(),
                          all.sin.narrow(0, start, q.size(2)).contiguous()};
  return {rotate_one(q, rows), rotate_one(k, rows)};
}

torch::Tensor CausalAttentionImpl::attend_rows(const torch::Tensor& qr, const torch::Tensor& kr,
                                               const torch::Tensor& v, int64_t start,
                                               int64_t context) const {
  // The float64 reference's logits for these rows (reference.h: the closed forms, the learned head
  // scale, ALiBi's slopes and a learned bias table), built on the device the rows live on, as the
  // reference kernel builds them in training: no host table, no host→device copy.
  const auto logits = reference_logits_rows(qr, kr, method_, start, context, logn_scale, bias_table(kr.size(2)));
  const auto p = torch::softmax(logits, -1);                             // (B, H, n, Tk)
  return torch::matmul(p, v.to(torch::kFloat64)).to(qr.scalar_type());  // (B, H, n, D)
}

torch::Tensor CausalAttentionImpl::forward_at(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, int64_t context,
                                              AttentionProbe* probe) {
  return std::get<0>(run(q, k, v, /*want_lse=*/false, context, probe));
}

torch::Tensor CausalAttentionImpl::forward_cached(const torch::Tensor& q, const torch::Tensor& k,
                                                  const torch::Tensor& v, torch::Tensor& k_cache,
                                                  torch::Tensor& v_cache, int64_t context) {
  const int64_t start = k_cache.defined() ? k_cache.size(2) : 0, n = q.size(2);
  if (q.dim() != 4 || k.sizes() != q.sizes() || v.sizes() != q.sizes())
    throw std::invalid_argument("CausalAttention: q, k, v must all be (B, H, n, D) of one shape");
  if (start + n > context)
    throw std::invalid_argument("CausalAttention::forward_cached: positions up to " +
                                std::to_string(start + n) + " exceed the context " +
                                std::to_string(context));
  check_context(method_, context);
  auto [qr, kr] = rotate_rows(q, k, start, context);
  k_cache = start == 0 ? kr.contiguous() : torch::cat({k_cache, kr}, 2);  // (B, H, start + n, D)
  v_cache = start == 0 ? v.contiguous() : torch::cat({v_cache, v}, 2);
  if (start == 0 && method_.kernel != Kernel::kReference)
    return std::get<0>(run(q, k, v, /*want_lse=*/false, context, nullptr));  // the prefill: the kernel
  return attend_rows(qr, k_cache, v_cache, start, context);
}

std::tuple<torch::Tensor, torch::Tensor> CausalAttentionImpl::run(const torch::Tensor& q,
                                                                  const torch::Tensor& k,
                                                                  const torch::Tensor& v,
                                                                  bool want_lse, int64_t context,
                                                                  AttentionProbe* probe) {
  if (q.dim() != 4 || k.sizes() != q.sizes() || v.sizes() != q.sizes())
    throw std::invalid_argument("CausalAttention: q, k, v must all be (B, H, T, D) of one shape");
  if (q.size(1) != method_.heads || q.size(3) != method_.head_dim)
    throw std::invalid_argument(
        "CausalAttention: got (B, H, T, D) with H = " + std::to_string(q.size(1)) +
        ", D = " + std::to_string(q.size(3)) + "; the method was built for heads = " +
        std::to_string(method_.heads) + ", head_dim = " + std::to_string(method_.head_dim));
  const int64_t T = q.size(2);
  check_context(method_, T);
  if (context == 0) context = T;
  if (context < T)
    throw std::invalid_argument("CausalAttention: context " + std::to_string(context) +
                                " is shorter than the sequence (" + std::to_string(T) + ")");
  check_context(method_, context);
  if (context != T) {  // a prefix of a longer sequence: that sequence's rotation and score-mod
    if (method_.kernel == Kernel::kReference || want_lse) {
      auto [qr, kr] = rotate_rows(q, k, 0, context);
      if (want_lse)
        throw std::invalid_argument("CausalAttention: no LSE at an overridden context");
      return {attend_rows(qr, kr, v, 0, context), torch::Tensor()};
    }
  }

  const bool use_reference = method_.kernel == Kernel::kReference;
  const bool use_cuda = method_.kernel == Kernel::kCuda || (method_.kernel == Kernel::kFused && q.is_cuda());
  if (use_cuda && !kHaveCudaKernel) no_cuda_kernel();

  torch::Tensor qr, kr;
  if (context != T)
    std::tie(qr, kr) = rotate_rows(q, k, 0, context);
  else if (!use_reference || probe)
    std::tie(qr, kr) = rotate(q, k);
  if (probe && probe->score_std) sample_score_std(qr, kr, method_.score_scale, *probe);
  // Learned bias parameters are kept above their floor, clamped before every forward (KERPLE's
  // code does so for r1, r2).
  if (!learned_bias_params.empty()) {
    torch::NoGradGuard no_grad;
    const auto& learned = transform_spec(method_.transform).learned;
    for (size_t p = 0; p < learned.size(); ++p)
      if (std::isfinite(learned[p].floor)) learned_bias_params[p].clamp_min_(learned[p].floor);
  }
  const torch::Tensor table = bias_table(T);  // (H, T) or undefined
  if (probe && probe->stats) {
    std::vector<float> storage;
    probe->stats->add(qr, kr, with_bias_table(attention::score_mod(method_, context), table, storage),
                        logn_scale, alibi_slopes_, method_.score_scale);
  }

  if (use_reference) {
    if (!want_lse) return {reference_attention(q, k, v, method_, logn_scale, table), torch::Tensor()};
    return reference_attention_with_lse(q, k, v, method_, logn_scale, table);
  }
  const ScoreMod mod = attention::score_mod(method_, context);
  if (use_cuda) {
#ifdef HARNESS_WITH_CUDA_KERNEL
    if (want_lse)
      throw std::invalid_argument(
          "CausalAttention::forward_with_lse: the CUDA kernel does not return LSE; use kernel "
          "'fused' on CPU tensors or 'reference'");
    if (alibi_slopes_.defined() && (!alibi_slopes_device_.defined() || alibi_slopes_device_.device() != q.device()))
      alibi_slopes_device_ = alibi_slope_tensor(method_, q.options().dtype(torch::kFloat32));  // once per device
    return {attention::cuda::fused_attention(qr, kr, v, mod, logn_scale, alibi_slopes_device_,
                                             table.defined() ? table.to(q.device(), torch::kFloat32) : table),
            torch::Tensor()};
#else
    no_cuda_kernel();
#endif
  }
  if (reduced(q)) {  // the CPU kernel is float32 / float64: bfloat16 runs attend in float32
    auto [o, lse] = fused_attention_cpu_with_lse(qr.to(torch::kFloat), kr.to(torch::kFloat),
                                                 v.to(torch::kFloat), mod, logn_scale, alibi_slopes_, table);
    return {o.to(q.scalar_type()), lse};
  }
  return fused_attention_cpu_with_lse(qr, kr, v, mod, logn_scale, alibi_slopes_, table);
}

torch::Tensor CausalAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, AttentionProbe* probe) {
  return std::get<0>(run(q, k, v, /*want_lse=*/false, 0, probe));
}

std::tuple<torch::Tensor, torch::Tensor> CausalAttentionImpl::forward_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, AttentionProbe* probe) {
  return run(q, k, v, /*want_lse=*/true, 0, probe);
}

}  // namespace attention
