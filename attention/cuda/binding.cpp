// Autograd wrapper around the fused CUDA attention kernels. Uses only APIs present in LibTorch
// 1.13 and 2.x: torch::autograd::Function, c10::cuda::CUDAGuard, c10::cuda::getCurrentCUDAStream
// (what at::cuda::getCurrentCUDAStream forwards to; its header, unlike ATen/cuda/CUDAContext.h,
// does not pull in the cuBLAS / cuSPARSE headers).
#include "attention/cuda/binding.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/autograd.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "attention/cuda/fused_attention.cuh"
#include "attention/cuda/kernel_limits.h"

namespace attention::cuda {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

DType element_type(const torch::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32 || t.scalar_type() == torch::kBFloat16,
              "fused_attention: expected float32 or bfloat16, got ", t.scalar_type());
  return t.scalar_type() == torch::kFloat32 ? DType::kFloat32 : DType::kBFloat16;
}

// Contiguous and 16-byte aligned, as the kernels require (they move 4 elements at a time).
torch::Tensor kernel_ready(const torch::Tensor& t) {
  torch::Tensor result = t.contiguous();
  if (reinterpret_cast<std::uintptr_t>(result.data_ptr()) % 16 != 0) result = result.clone();
  return result;
}

void check_cuda(cudaError_t status, const char* what) {
  TORCH_CHECK(status == cudaSuccess, "fused_attention ", what, ": ", cudaGetErrorString(status));
}

// The ScoreMod travels to the backward pass whole, as one trivially-copyable value (its bytes
// in ctx->saved_data), so a field added to score_mod.h needs nothing here. Its per-head pointers
// are re-pointed at the saved tensors in make_args.
static_assert(std::is_trivially_copyable<ScoreMod>::value, "ScoreMod must be saved as bytes");

void save_mod(AutogradContext* ctx, ScoreMod mod) {
  mod.head_scale = nullptr;
  mod.alibi_slope = nullptr;
  mod.bias_table = nullptr;
  std::vector<int64_t> words((sizeof(ScoreMod) + sizeof(int64_t) - 1) / sizeof(int64_t), 0);
  std::memcpy(words.data(), &mod, sizeof(ScoreMod));
  ctx->saved_data["score_mod"] = words;
}

ScoreMod load_mod(AutogradContext* ctx) {
  const std::vector<int64_t> words = ctx->saved_data["score_mod"].toIntVector();
  ScoreMod mod;
  std::memcpy(static_cast<void*>(&mod), words.data(), sizeof(ScoreMod));
  return mod;
}

FusedArgs make_args(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    ScoreMod mod, const torch::Tensor& head_scale, const torch::Tensor& alibi_slope,
                    const torch::Tensor& bias_table) {
  FusedArgs args;
  args.batch = static_cast<int>(q.size(0));
  args.heads = static_cast<int>(q.size(1));
  args.seq_len = static_cast<int>(q.size(2));
  args.head_dim = static_cast<int>(q.size(3));
  args.dtype = element_type(q);
  mod.head_scale = head_scale.defined() ? head_scale.data_ptr<float>() : nullptr;
  mod.alibi_slope = alibi_slope.defined() ? alibi_slope.data_ptr<float>() : nullptr;
  mod.bias_table = bias_table.defined() ? bias_table.data_ptr<float>() : nullptr;
  mod.bias_table_len = bias_table.defined() ? static_cast<int>(bias_table.size(1)) : 0;
  args.mod = mod;
  args.q = q.data_ptr();
  args.k = k.data_ptr();
  args.v = v.data_ptr();
  return args;
}

}  // namespace

ForwardPass fused_attention_forward_pass(const torch::Tensor& q_in, const torch::Tensor& k_in,
                                         const torch::Tensor& v_in, const ScoreMod& mod,
                                         const torch::Tensor& head_scale_in,
                                         const torch::Tensor& alibi_slope_in,
                                         const torch::Tensor& bias_table_in) {
  const c10::cuda::CUDAGuard device_guard(q_in.device());
  const torch::Tensor q = kernel_ready(q_in), k = kernel_ready(k_in), v = kernel_ready(v_in);
  const torch::Tensor head_scale = head_scale_in.defined() ? kernel_ready(head_scale_in) : torch::Tensor();
  const torch::Tensor alibi_slope = alibi_slope_in.defined() ? kernel_ready(alibi_slope_in) : torch::Tensor();
  const torch::Tensor bias_table = bias_table_in.defined() ? kernel_ready(bias_table_in) : torch::Tensor();

  FusedArgs args = make_args(q, k, v, mod, head_scale, alibi_slope, bias_table);
  ForwardPass r;
  r.o = torch::empty_like(q);                                                    // (B, H, T, D)
  const auto row_options = q.options().dtype(torch::kFloat32);
  r.lse = torch::empty({q.size(0), q.size(1), q.size(2)}, row_options);          // (B, H, T)
  // (B, H, T): what the head-scale gradient needs from the forward pass.
  if (head_scale.defined()) r.fixed_logit_mean = torch::empty({q.size(0), q.size(1), q.size(2)}, row_options);
  args.o = r.o.data_ptr();
  args.lse = r.lse.data_ptr<float>();
  args.fixed_logit_mean = r.fixed_logit_mean.defined() ? r.fixed_logit_mean.data_ptr<float>() : nullptr;
  check_cuda(fused_attention_forward(args, c10::cuda::getCurrentCUDAStream().stream()), "forward");
  return r;
}

Gradients fused_attention_backward_pass(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const ForwardPass& forward,
                                        const torch::Tensor& d_o_in, const ScoreMod& mod,
                                        const torch::Tensor& head_scale,
                                        const torch::Tensor& alibi_slope,
                                        const torch::Tensor& bias_table) {
  const c10::cuda::CUDAGuard device_guard(q.device());
  const torch::Tensor d_o = kernel_ready(d_o_in.to(q.scalar_type()));  // (B, H, T, D)
  Gradients g;
  g.dq = torch::empty_like(q);
  g.dk = torch::empty_like(k);
  g.dv = torch::empty_like(v);
  if (head_scale.defined()) g.dhead_scale = torch::empty_like(head_scale);  // (H)

  FusedArgs args = make_args(q, k, v, mod, head_scale, alibi_slope, bias_table);
  // d loss/d bias_table: (H, T), d loss/d logit summed per distance, or a FIRE table's (H, G + 2).
  if (bias_table.defined())
    g.dbias_table = torch::empty({q.size(1), bias_gradient_len(args)}, q.options().dtype(torch::kFloat32));
  args.o = forward.o.data_ptr();
  args.lse = forward.lse.data_ptr<float>();
  args.fixed_logit_mean =
      forward.fixed_logit_mean.defined() ? forward.fixed_logit_mean.data_ptr<float>() : nullptr;
  args.d_o = d_o.data_ptr();
  args.dq = g.dq.data_ptr();
  args.dk = g.dk.data_ptr();
  args.dv = g.dv.data_ptr();
  args.dhead_scale = g.dhead_scale.defined() ? g.dhead_scale.data_ptr<float>() : nullptr;
  args.dbias_table = g.dbias_table.defined() ? g.dbias_table.data_ptr<float>() : nullptr;
  const torch::Tensor workspace = torch::empty(
      {static_cast<int64_t>(fused_attention_backward_workspace_bytes(args))},
      q.options().dtype(torch::kUInt8));
  args.workspace = workspace.data_ptr();
  check_cuda(fused_attention_backward(args, c10::cuda::getCurrentCUDAStream().stream()), "backward");
  return g;
}

namespace {

// head_scale, alibi_slope and bias_table travel as optionals: an undefined at::Tensor argument is not allowed
// by torch::autograd::Function (it records metadata of every tensor argument).
class FusedAttentionFunction : public torch::autograd::Function<FusedAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in,
                               const c10::optional<torch::Tensor>& head_scale_in,
                               const c10::optional<torch::Tensor>& alibi_slope_in,
                               const c10::optional<torch::Tensor>& bias_table_in,
                               const ScoreMod& mod) {
    const c10::cuda::CUDAGuard device_guard(q_in.device());
    const torch::Tensor q = kernel_ready(q_in), k = kernel_ready(k_in), v = kernel_ready(v_in);
    const torch::Tensor head_scale = head_scale_in ? kernel_ready(*head_scale_in) : torch::Tensor();
    const torch::Tensor alibi_slope = alibi_slope_in ? kernel_ready(*alibi_slope_in) : torch::Tensor();
    const torch::Tensor bias_table = bias_table_in ? kernel_ready(*bias_table_in) : torch::Tensor();
    const ForwardPass f = fused_attention_forward_pass(q, k, v, mod, head_scale, alibi_slope, bias_table);

    // Undefined tensors are not saved: flags say which optional ones follow the fixed five.
    variable_list saved = {q, k, v, f.o, f.lse};
    if (head_scale.defined()) {
      saved.push_back(head_scale);
      saved.push_back(f.fixed_logit_mean);
    }
    if (alibi_slope.defined()) saved.push_back(alibi_slope);
    if (bias_table.defined()) saved.push_back(bias_table);
    ctx->save_for_backward(saved);
    ctx->saved_data["has_head_scale"] = head_scale.defined();
    ctx->saved_data["has_alibi_slope"] = alibi_slope.defined();
    ctx->saved_data["has_bias_table"] = bias_table.defined();
    save_mod(ctx, mod);
    return f.o;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    ForwardPass f;
    f.o = saved[3];
    f.lse = saved[4];
    size_t next = 5;
    const bool has_head_scale = ctx->saved_data["has_head_scale"].toBool();
    const torch::Tensor head_scale = has_head_scale ? saved[next++] : torch::Tensor();
    if (has_head_scale) f.fixed_logit_mean = saved[next++];
    const torch::Tensor alibi_slope =
        ctx->saved_data["has_alibi_slope"].toBool() ? saved[next++] : torch::Tensor();
    const torch::Tensor bias_table =
        ctx->saved_data["has_bias_table"].toBool() ? saved[next++] : torch::Tensor();
    const Gradients g = fused_attention_backward_pass(saved[0], saved[1], saved[2], f, grad_outputs[0],
                                                      load_mod(ctx), head_scale, alibi_slope, bias_table);
    // One gradient per forward argument: q, k, v, head_scale, alibi_slope, bias_table, mod.
    return {g.dq, g.dk, g.dv, g.dhead_scale, torch::Tensor(), g.dbias_table, torch::Tensor()};
  }
};

void check_per_head(const torch::Tensor& t, const char* name, const torch::Tensor& q) {
  TORCH_CHECK(t.dim() == 1 && t.size(0) == q.size(1), "fused_attention: ", name,
              " must have shape (H) = (", q.size(1), "), got ", t.sizes());
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "fused_attention: ", name, " must be float32");
  TORCH_CHECK(t.device() == q.device(), "fused_attention: ", name, " must be on ", q.device());
}

}  // namespace

torch::Tensor fused_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                              const attention::ScoreMod& mod, const torch::Tensor& head_scale,
                              const torch::Tensor& alibi_slope, const torch::Tensor& bias_table) {
  TORCH_CHECK(q.is_cuda(), "fused_attention: q must be a CUDA tensor");
  TORCH_CHECK(q.dim() == 4, "fused_attention: q must be (B, H, T, D), got ", q.sizes());
  TORCH_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "fused_attention: q, k, v must have equal shapes, got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "fused_attention: q, k, v must have the same dtype");
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(),
              "fused_attention: q, k, v must be on the same device");
  TORCH_CHECK(fused_attention_supported(static_cast<int>(q.size(3)), element_type(q)),
              "fused_attention: head dim must be 64 or 128, got ", q.size(3));
  TORCH_CHECK(q.size(0) * q.size(1) <= 65535, "fused_attention: B·H must be at most 65535");
  TORCH_CHECK(q.size(2) <= INT32_MAX, "fused_attention: sequence too long");

  c10::optional<torch::Tensor> head_scale_arg, alibi_slope_arg, bias_table_arg;
  if (head_scale.defined()) {
    check_per_head(head_scale, "head_scale", q);
    head_scale_arg = head_scale;
  }
  if (alibi_slope.defined()) {
    check_per_head(alibi_slope, "alibi_slope", q);
    // The kernels have no slope gradient: refuse rather than silently return zero.
    TORCH_CHECK(!(alibi_slope.requires_grad() && torch::GradMode::is_enabled()),
                "fused_attention: alibi_slope gradients are not implemented (detach it)");
    alibi_slope_arg = alibi_slope;
  }
  if (bias_table.defined()) {
    if (mod.table_index == TableIndex::kFire) {  // FIRE: (H, G + 2), whatever T
      TORCH_CHECK(bias_table.dim() == 2 && bias_table.size(0) == q.size(1) &&
                      supported_fire_table_len(bias_table.size(1)),
                  "fused_attention: a FIRE bias_table must have shape (H, G + 2) = (", q.size(1), ", G + 2) with ",
                  kMinFireGrid, " <= G <= ", kMaxFireGrid, ", got ", bias_table.sizes());
    } else {
      TORCH_CHECK(bias_table.dim() == 2 && bias_table.size(0) == q.size(1) && bias_table.size(1) == q.size(2),
                  "fused_attention: bias_table must have shape (H, T) = (", q.size(1), ", ", q.size(2), "), got ",
                  bias_table.sizes());
    }
    TORCH_CHECK(bias_table.scalar_type() == torch::kFloat32 && bias_table.device() == q.device(),
                "fused_attention: bias_table must be float32 on ", q.device());
    bias_table_arg = bias_table;
  }
  return FusedAttentionFunction::apply(q, k, v, head_scale_arg, alibi_slope_arg, bias_table_arg, mod);
}

}  // namespace attention::cuda
