#include "attention/attention.h"

#include "attention/fused_cpu.h"
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

// Std of s = scale·q·k over a fixed sample of causal pairs (see attention.h).
double sampled_score_std(const torch::Tensor& q, const torch::Tensor& k, double scale) {
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
  const auto idx = torch::TensorOptions().dtype(torch::kLong).device(q.device());
  const auto qi = q.index_select(2, torch::tensor(I, idx.device(torch::kCPU)).to(q.device()));
  const auto kj = k.index_select(2, torch::tensor(J, idx.device(torch::kCPU)).to(q.device()));
  const auto s = (qi.to(torch::kFloat64) * kj.to(torch::kFloat64)).sum(-1) * scale;  // (B, H, S)
  return s.numel() > 1 ? s.std().item<double>() : 0.0;
}

}  // namespace

CausalAttentionImpl::CausalAttentionImpl(MethodOptions options)
    : options_(std::move(options)), method_(resolve_method(options_)) {
  if (method_.kernel == "cuda" && !kHaveCudaKernel) no_cuda_kernel();
  if (method_.learned_head_scale())
    logn_scale = register_parameter(
        "logn_scale", torch::full({method_.heads}, initial_head_scale(method_), torch::kFloat32));
  alibi_slopes_ = alibi_slope_tensor(method_);
}

std::pair<torch::Tensor, torch::Tensor> CausalAttentionImpl::rotate(const torch::Tensor& q,
                                                                    const torch::Tensor& k) const {
  if (!method_.rotary()) return {q, k};
  const RotaryTables tables = rotary_tables(method_, q.size(2), q.options());
  return {apply_rotary_fused(q, tables), apply_rotary_fused(k, tables)};
}

std::tuple<torch::Tensor, torch::Tensor> CausalAttentionImpl::run(const torch::Tensor& q,
                                                                  const torch::Tensor& k,
                                                                  const torch::Tensor& v,
                                                                  bool want_lse) {
  if (q.dim() != 4 || k.sizes() != q.sizes() || v.sizes() != q.sizes())
    throw std::invalid_argument("CausalAttention: q, k, v must all be (B, H, T, D) of one shape");
  if (q.size(1) != method_.heads || q.size(3) != method_.head_dim)
    throw std::invalid_argument(
        "CausalAttention: got (B, H, T, D) with H = " + std::to_string(q.size(1)) +
        ", D = " + std::to_string(q.size(3)) + "; the method was built for heads = " +
        std::to_string(method_.heads) + ", head_dim = " + std::to_string(method_.head_dim));
  const int64_t T = q.size(2);
  check_context(method_, T);

  const bool use_reference = method_.kernel == "reference";
  const bool use_cuda = method_.kernel == "cuda" || (method_.kernel == "fused" && q.is_cuda());
  if (use_cuda && !kHaveCudaKernel) no_cuda_kernel();

  torch::Tensor qr, kr;
  if (!use_reference || record_score_std || stats_recorder) std::tie(qr, kr) = rotate(q, k);
  if (record_score_std) last_score_std = sampled_score_std(qr, kr, method_.score_scale);
  if (stats_recorder)
    stats_recorder->add(qr, kr, attention::score_mod(method_, T), logn_scale, alibi_slopes_,
                        method_.score_scale);

  if (use_reference) {
    if (!want_lse) return {reference_attention(q, k, v, method_, logn_scale), torch::Tensor()};
    return reference_attention_with_lse(q, k, v, method_, logn_scale);
  }
  const ScoreMod mod = attention::score_mod(method_, T);
  if (use_cuda) {
#ifdef HARNESS_WITH_CUDA_KERNEL
    if (want_lse)
      throw std::invalid_argument(
          "CausalAttention::forward_with_lse: the CUDA kernel does not return LSE; use kernel "
          "'fused' on CPU tensors or 'reference'");
    const torch::Tensor slopes =
        alibi_slopes_.defined() ? alibi_slopes_.to(q.device(), torch::kFloat32) : torch::Tensor();
    return {attention::cuda::fused_attention(qr, kr, v, mod, logn_scale, slopes), torch::Tensor()};
#else
    no_cuda_kernel();
#endif
  }
  return fused_attention_cpu_with_lse(qr, kr, v, mod, logn_scale, alibi_slopes_);
}

torch::Tensor CausalAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v) {
  return std::get<0>(run(q, k, v, /*want_lse=*/false));
}

std::tuple<torch::Tensor, torch::Tensor> CausalAttentionImpl::forward_with_lse(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return run(q, k, v, /*want_lse=*/true);
}

}  // namespace attention
