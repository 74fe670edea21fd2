// GPU check of attention::cuda::fused_attention (the LibTorch binding), run by scripts/gpu-check.sh:
//  1. forward o and backward dq, dk, dv, dhead_scale against the harness's float64 reference
//     (attention/reference.h: materialised logits from its own closed forms, autograd), for every
//     logit transform of the registry (attention/transforms.h) and ALiBi, fp32 and bf16;
//  2. timings at B=1, H=6, D=128 with the scale-invariant score mod (τ = 10), written as CSV rows
//     "T,dtype,fwd_ms,fwd_bwd_ms" to the file given by --timing-csv.
// Exit code: 0 when every check passes, 1 otherwise.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "attention/cuda/binding.h"
#include "attention/learned_bias.h"
#include "attention/method_tensors.h"
#include "attention/reference.h"
#include "attention/score_mod.h"
#include "tests/cuda/fire_table.h"

namespace {

using attention::ScoreMod;

// max |got − want| / max(max |want|, floor)
double relative_error(const torch::Tensor& got, const torch::Tensor& want, double floor) {
  const double diff = (got.to(torch::kFloat64) - want).abs().max().item<double>();
  const double scale = want.abs().max().item<double>();
  return std::isnan(diff) ? INFINITY : diff / std::max(scale, floor);
}

struct ModCase {
  std::string name;
  attention::Method method;  // positional nope or alibi: q and k reach the kernel unrotated
};

// Every registry transform, without and with ALiBi (L = 64 for those that read it).
std::vector<ModCase> mod_cases(int64_t heads, int64_t head_dim) {
  std::vector<ModCase> cases;
  for (const auto& spec : attention::transforms())
    for (const char* positional : {"nope", "alibi"}) {
      attention::MethodOptions o;
      o.method = "nope";
      o.positional = positional;
      o.transform = spec.name;
      o.parameters[attention::Parameter::kTau] = 10.0;
      o.heads = heads;
      o.head_dim = head_dim;
      o.train_context = 64;
      cases.push_back({std::string(spec.name) + "+" + positional, attention::resolve_method(o)});
    }
  return cases;
}

// Learned values (H, P) split into the row's parameters, in its `learned` order.
std::vector<torch::Tensor> split_parameters(const attention::Method& m, const torch::Tensor& values) {
  std::vector<torch::Tensor> params;
  int64_t column = 0;
  for (const auto& p : attention::transform_spec(m.transform).learned) {
    params.push_back(values.narrow(1, column, p.per_head).contiguous());
    column += p.per_head;
  }
  return params;
}

// Whether the FIRE table these values make has no pair at T on the edge of a kink
// (tests/cuda/fire_table.h: there float32 and float64 may rightly differ in d loss/d c, d loss/d L).
bool fire_table_comparable(const attention::Method& m, const torch::Tensor& values, int64_t T) {
  const torch::Tensor table = attention::learned_bias_table(m, split_parameters(m, values), T).contiguous();
  const int G = static_cast<int>(table.size(1)) - 2;
  for (int64_t h = 0; h < table.size(0); ++h)
    if (!attention::cuda::test::fire_cells_unambiguous(table[h].data_ptr<double>(), G, static_cast<int>(T)))
      return false;
  return true;
}

// A learned bias's parameters moved off their initial values, as ours (float32 on the device) and
// the reference's (float64, CPU) copies; each side builds its table from them (learned_bias.h), so
// the parameters' gradients check the kernel's d loss/d table. For a FIRE table the move varies
// until the table is comparable at T. Empty without a learned bias.
void learned_parameters(const attention::Method& m, int64_t T, std::vector<torch::Tensor>& ours,
                        std::vector<torch::Tensor>& ref) {
  if (!m.learned_bias()) return;
  const int64_t P = attention::learned_values_per_head(m);
  const torch::Tensor initial = torch::tensor(attention::initial_learned_values(m), torch::kFloat64).view({m.heads, P});
  const bool fire = attention::score_mod(m, T).table_index == attention::TableIndex::kFire;
  torch::Tensor values = initial * 0.8 + 0.1;
  for (int attempt = 1; fire && !fire_table_comparable(m, values, T); ++attempt) {
    if (attempt == 400) {
      std::printf("note: no FIRE table at T=%lld without pairs on a kink; c, L gradients may differ\n",
                  static_cast<long long>(T));
      break;
    }
    values = initial * (0.8 + 0.001 * attempt) + (0.1 + 0.0005 * attempt);
  }
  for (const torch::Tensor& v : split_parameters(m, values)) {
    ours.push_back(v.to(torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32)).requires_grad_(true));
    ref.push_back(v.clone().requires_grad_(true));
  }
}

// One comparison; returns whether it passed.
bool check_case(torch::ScalarType dtype, int64_t head_dim, int64_t seq_len, const ModCase& c) {
  constexpr int64_t kBatch = 2;
  const int64_t heads = c.method.heads;
  const auto device_options = torch::TensorOptions().device(torch::kCUDA);
  const auto shape = std::vector<int64_t>{kBatch, heads, seq_len, head_dim};
  // Inputs made in the element type, so the reference sees exactly what the kernel sees.
  const torch::Tensor q = torch::randn(shape, device_options.dtype(dtype));
  const torch::Tensor k = torch::randn(shape, device_options.dtype(dtype));
  const torch::Tensor v = torch::randn(shape, device_options.dtype(dtype));
  const torch::Tensor d_o = torch::randn(shape, device_options.dtype(dtype));
  const torch::Tensor head_scale = c.method.learned_head_scale()
                                       ? torch::tensor({0.7f, 1.0f, 1.4f}, device_options.dtype(torch::kFloat32))
                                       : torch::Tensor();
  const torch::Tensor alibi_slope =
      c.method.alibi() ? attention::alibi_slope_tensor(c.method).to(device_options.dtype(torch::kFloat32))
                       : torch::Tensor();
  const auto& learned = attention::transform_spec(c.method.transform).learned;
  std::vector<torch::Tensor> params_ours, params_ref;
  learned_parameters(c.method, seq_len, params_ours, params_ref);

  // Ours.
  torch::Tensor q_ours = q.clone().requires_grad_(true), k_ours = k.clone().requires_grad_(true),
                v_ours = v.clone().requires_grad_(true);
  torch::Tensor head_scale_ours = head_scale.defined() ? head_scale.clone().requires_grad_(true) : torch::Tensor();
  const torch::Tensor o_ours = attention::cuda::fused_attention(
      q_ours, k_ours, v_ours, attention::score_mod(c.method, seq_len), head_scale_ours, alibi_slope,
      attention::learned_bias_table(c.method, params_ours, seq_len));
  o_ours.backward(d_o);

  // float64 reference.
  torch::Tensor q_ref = q.to(torch::kFloat64).requires_grad_(true), k_ref = k.to(torch::kFloat64).requires_grad_(true),
                v_ref = v.to(torch::kFloat64).requires_grad_(true);
  torch::Tensor head_scale_ref =
      head_scale.defined() ? head_scale.to(torch::kFloat64).requires_grad_(true) : torch::Tensor();
  const torch::Tensor o_ref = attention::reference_attention(
      q_ref, k_ref, v_ref, c.method, head_scale_ref, attention::learned_bias_table(c.method, params_ref, seq_len));
  o_ref.backward(d_o.to(torch::kFloat64));

  const double tolerance = dtype == torch::kBFloat16 ? 2e-2 : 1e-4;
  struct Entry {
    const char* name;
    double error;
  };
  std::vector<Entry> entries = {
      {"o", relative_error(o_ours, o_ref, 1e-3)},
      {"dq", relative_error(q_ours.grad(), q_ref.grad(), 1.0)},  // dq, dk vanish at T = 1
      {"dk", relative_error(k_ours.grad(), k_ref.grad(), 1.0)},
      {"dv", relative_error(v_ours.grad(), v_ref.grad(), 1e-3)},
  };
  if (head_scale.defined()) {
    entries.push_back({"dhead_scale", relative_error(head_scale_ours.grad(), head_scale_ref.grad(), 1.0)});
  }
  for (size_t p = 0; p < params_ours.size(); ++p)
    entries.push_back({learned[p].name, relative_error(params_ours[p].grad(), params_ref[p].grad(), 1.0)});
  bool ok = true;
  std::string line;
  for (const Entry& e : entries) {
    const bool pass = e.error <= tolerance;
    ok = ok && pass;
    char text[64];
    std::snprintf(text, sizeof(text), " %s=%.2e%s", e.name, e.error, pass ? "" : "!");
    line += text;
  }
  std::printf("%-4s %-5s D=%-3lld T=%-4lld %-26s%s\n", ok ? "ok" : "FAIL",
              dtype == torch::kBFloat16 ? "bf16" : "fp32", static_cast<long long>(head_dim),
              static_cast<long long>(seq_len), c.name.c_str(), line.c_str());
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Timing.

double time_ms(const std::function<void()>& body, int warmup, int iterations) {
  for (int n = 0; n < warmup; ++n) body();
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int n = 0; n < iterations; ++n) body();
  torch::cuda::synchronize();
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

void write_timings(const std::string& csv_path) {
  std::ofstream csv(csv_path);
  csv << "T,dtype,fwd_ms,fwd_bwd_ms\n";
  constexpr int64_t kHeads = 6, kHeadDim = 128;
  ScoreMod mod;  // scale-invariant logits, τ = 10, as in bench/flex_bench.py
  mod.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  mod.distance = attention::DistanceMod::kScaleInvariant;
  mod.inv_tau = 0.1f;
  for (const int64_t seq_len : {1024, 4096, 16384}) {
    for (const torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
      const auto options = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
      const auto shape = std::vector<int64_t>{1, kHeads, seq_len, kHeadDim};
      torch::Tensor q = torch::randn(shape, options).requires_grad_(true);
      torch::Tensor k = torch::randn(shape, options).requires_grad_(true);
      torch::Tensor v = torch::randn(shape, options).requires_grad_(true);
      const torch::Tensor d_o = torch::randn(shape, options);
      const int iterations = seq_len >= 16384 ? 3 : 10;
      const double forward_ms = time_ms(
          [&] {
            torch::NoGradGuard no_grad;
            attention::cuda::fused_attention(q, k, v, mod, torch::Tensor(), torch::Tensor());
          },
          2, iterations);
      const double forward_backward_ms = time_ms(
          [&] {
            attention::cuda::fused_attention(q, k, v, mod, torch::Tensor(), torch::Tensor()).backward(d_o);
          },
          1, iterations);
      const char* name = dtype == torch::kBFloat16 ? "bf16" : "fp32";
      std::printf("timing T=%lld %s: fwd %.3f ms, fwd+bwd %.3f ms\n", static_cast<long long>(seq_len), name,
                  forward_ms, forward_backward_ms);
      csv << seq_len << "," << name << "," << forward_ms << "," << forward_backward_ms << "\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string timing_csv;
  for (int n = 1; n < argc; ++n) {
    const std::string arg = argv[n];
    if (arg == "--timing-csv" && n + 1 < argc) timing_csv = argv[++n];
  }
  if (!torch::cuda::is_available()) {
    std::printf("gpu_check: torch sees no CUDA device\n");
    return 1;
  }
  torch::manual_seed(0);

  int failures = 0, cases = 0;
  for (const torch::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const int64_t head_dim : {64, 128}) {
      for (const int64_t seq_len : {1, 37, 300}) {
        for (const ModCase& c : mod_cases(3, head_dim)) {
          ++cases;
          if (!check_case(dtype, head_dim, seq_len, c)) ++failures;
        }
      }
    }
  }
  std::printf("gpu_check: %s, %d of %d cases failing (fp32 tolerance 1e-4, bf16 2e-2)\n",
              failures ? "FAILED" : "PASSED", failures, cases);

  if (!timing_csv.empty()) write_timings(timing_csv);
  return failures ? 1 : 0;
}
