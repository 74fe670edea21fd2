#include "models/chunked_loss.h"

#include <torch/torch.h>

#include <algorithm>

namespace models {

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The float type the softmax statistics use: float64 for float64 input, else float32.
torch::ScalarType accumulate_type(const Tensor& hidden) {
  return hidden.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

// One chunk's logits (n, V) in the accumulation type, from the GEMM in `compute`.
Tensor chunk_logits(const Tensor& h, const Tensor& w_compute, torch::ScalarType acc) {
  return torch::matmul(h.to(w_compute.scalar_type()), w_compute.t()).to(acc);
}

// Per-row NLL of one chunk, and with `grad` its d(sum of NLL)/d logits = softmax − one-hot.
struct ChunkResult {
  Tensor nll;     // (n)
  Tensor dlogit;  // (n, V), only when asked for
};

ChunkResult chunk_loss(const Tensor& h, const Tensor& w_compute, const Tensor& t,
                       torch::ScalarType acc, bool grad) {
  Tensor logits = chunk_logits(h, w_compute, acc);           // (n, V)
  const Tensor lse = torch::logsumexp(logits, -1);           // (n)
  const Tensor picked = logits.gather(1, t.unsqueeze(1)).squeeze(1);
  ChunkResult r{lse - picked, Tensor()};
  if (grad) {
    logits.sub_(lse.unsqueeze(1)).exp_();                    // softmax, in place: one (n, V) buffer
    logits.scatter_add_(1, t.unsqueeze(1), torch::full({t.size(0), 1}, -1.0, logits.options()));
    r.dlogit = logits;
  }
  return r;
}

void check_inputs(const Tensor& hidden, const Tensor& weight, const Tensor& targets, int64_t chunk_rows) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked_cross_entropy: hidden (N, C) and weight (V, C), got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) && targets.scalar_type() == torch::kLong,
              "chunked_cross_entropy: targets must be (N) int64 with N = ", hidden.size(0));
  TORCH_CHECK(chunk_rows >= 1, "chunked_cross_entropy: chunk_rows must be >= 1");
}

class ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& hidden, const Tensor& weight,
                        const Tensor& targets, int64_t compute, int64_t chunk_rows, bool grad) {
    const auto acc = accumulate_type(hidden);
    const auto dtype = static_cast<torch::ScalarType>(compute);
    const int64_t N = hidden.size(0);
    const Tensor w = weight.to(dtype);
    // grad: the backward will run; its gradients are computed here (see chunked_loss.h).
    Tensor total = torch::zeros({}, hidden.options().dtype(acc));
    Tensor dhidden = grad ? torch::empty_like(hidden) : Tensor();
    Tensor dweight = grad ? torch::zeros(weight.sizes(), weight.options().dtype(acc)) : Tensor();
    for (int64_t start = 0; start < N; start += chunk_rows) {
      const int64_t n = std::min(chunk_rows, N - start);
      const Tensor h = hidden.narrow(0, start, n);
      const ChunkResult r = chunk_loss(h, w, targets.narrow(0, start, n), acc, grad);
      total += r.nll.sum();
      if (!grad) continue;
      const Tensor d = r.dlogit.to(dtype);                                          // (n, V)
      dhidden.narrow(0, start, n).copy_(torch::matmul(d, w));                        // (n, C)
      dweight.add_(torch::matmul(d.t(), h.to(dtype)).to(acc));                       // (V, C)
    }
    if (grad) {
      ctx->save_for_backward({dhidden, dweight});
      ctx->saved_data["rows"] = N;
    }
    return total / double(std::max<int64_t>(N, 1));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const double N = double(std::max<int64_t>(ctx->saved_data["rows"].toInt(), 1));
    const Tensor scale = grads[0] / N;  // d loss / d (sum of NLL)
    Tensor dhidden = saved[0] * scale.to(saved[0].scalar_type());
    Tensor dweight = saved[1] * scale.to(saved[1].scalar_type());
    return {dhidden, dweight, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

int64_t default_loss_chunk_rows(int64_t vocab_size) {
  constexpr int64_t kChunkElements = int64_t(1) << 25;  // 128 MiB of float32
  return std::max<int64_t>(1, kChunkElements / std::max<int64_t>(vocab_size, 1));
}

Tensor chunked_cross_entropy(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                             torch::ScalarType compute, int64_t chunk_rows) {
  check_inputs(hidden, weight, targets, chunk_rows);
  const bool grad = torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad());
  return ChunkedCrossEntropy::apply(hidden, weight, targets, static_cast<int64_t>(compute), chunk_rows, grad);
}

Tensor chunked_nll(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                   torch::ScalarType compute, int64_t chunk_rows) {
  check_inputs(hidden, weight, targets, chunk_rows);
  torch::NoGradGuard no_grad;
  const auto acc = accumulate_type(hidden);
  const Tensor w = weight.to(compute);
  const int64_t N = hidden.size(0);
  Tensor out = torch::empty({N}, hidden.options().dtype(acc));
  for (int64_t start = 0; start < N; start += chunk_rows) {
    const int64_t n = std::min(chunk_rows, N - start);
    out.narrow(0, start, n).copy_(chunk_loss(hidden.narrow(0, start, n), w, targets.narrow(0, start, n), acc, false).nll);
  }
  return out;
}

}  // namespace models
