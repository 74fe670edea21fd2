// The fused CPU kernel against the reference (float32, forward, LSE and every gradient), finite-
// difference gradient checks of its backward in float64 (q, k, v, the learned LogN scale, a
// learned bias table, LSE), every ISA path this CPU runs, and the module around it (the learned
// parameters of every registry row, through their table, by finite differences).
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/fused_cpu.h"
#include "attention/learned_bias.h"
#include "attention/method.h"
#include "attention/reference.h"

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using torch::Tensor;

attention::MethodOptions options(const std::string& preset, int64_t H, int64_t D, int64_t L,
                                  const std::string& kernel = "fused") {
  attention::MethodOptions o;
  o.method = preset;
  o.heads = H;
  o.head_dim = D;
  o.train_context = L;
  o.parameters[attention::Parameter::kTau] = 3.0;
  o.kernel = kernel;
  return o;
}

double max_rel(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>() /
         std::max(1e-30, b.to(torch::kFloat64).abs().max().item<double>());
}

// Head scales that differ per head (the learned parameter moves away from its init).
Tensor some_head_scale(int64_t H, torch::Dtype dtype) {
  return (0.3 + 0.2 * torch::arange(H, torch::kFloat64)).to(dtype);
}

// A learned bias table for the kernels: the row's table at its initial values plus a fixed
// ripple, so that every entry differs (T5's buckets and FIRE's f start at 0); FIRE's c_h and L_h
// (its last two entries) set apart per head, L_h between query rows (both sides of max(L_h, i));
// undefined for methods without a learned bias.
Tensor some_bias_table(const attention::Method& m, int64_t T, torch::Dtype dtype) {
  if (!m.learned_bias()) return {};
  const auto& spec = attention::transform_spec(m.transform);
  const int64_t E = attention::learned_table_length(spec, T);
  const auto values = attention::learned_bias_table_values(m, attention::initial_learned_values(m), T);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  Tensor table = torch::tensor(values, f64).view({m.heads, E}) +
                 0.3 * torch::arange(m.heads * E, f64).view({m.heads, E}).mul(0.7).sin();
  if (spec.table == attention::TableIndex::kFire) {
    const auto h = torch::arange(m.heads, f64);
    table.select(1, E - 2).copy_(0.2 + 0.15 * h);                // c_h
    table.select(1, E - 1).copy_(0.4 * double(T) + 0.37 + h);    // L_h
  }
  return table.to(dtype);
}

// A module's learned bias parameters moved away from their init (every value different), the
// same in each module given.
void move_learned_bias(const std::vector<attention::CausalAttention*>& modules) {
  torch::NoGradGuard g;
  for (auto* m : modules)
    for (auto& p : (*m)->learned_bias_params) {
      // A ramp to 0.15 over the parameter's values: FIRE's 32 hidden units per head stay of order 1.
      const auto ramp = torch::arange(p.numel(), torch::kFloat64).view(p.sizes()) / double(p.numel());
      p.copy_(p.to(torch::kFloat64) * 0.8 + 0.15 * ramp + 0.1);
    }
}

struct Result {
  Tensor out, lse, dq, dk, dv, dhead, dbias;
};

// Loss = Σ out·wo + Σ lse·wl (random weights, so every output element matters).
// Arguments: q, k, v, head scale, bias table.
using Kernel = std::function<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                        const Tensor&, const Tensor&)>;

Result run(const Kernel& kernel, const Tensor& q0, const Tensor& k0, const Tensor& v0,
           const Tensor& head0, const Tensor& bias0, const Tensor& wo, const Tensor& wl) {
  auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
       v = v0.clone().requires_grad_();
  Tensor head = head0.defined() ? head0.clone().requires_grad_() : Tensor();
  Tensor bias = bias0.defined() ? bias0.clone().requires_grad_() : Tensor();
  auto [out, lse] = kernel(q, k, v, head, bias);
  ((out * wo).sum() + (lse * wl).sum()).backward();
  return {out.detach(), lse.detach(), q.grad(), k.grad(), v.grad(),
          head.defined() ? head.grad() : Tensor(), bias.defined() ? bias.grad() : Tensor()};
}

void expect_close(const Result& a, const Result& b, double tol, const std::string& what) {
  EXPECT_LT(max_rel(a.out, b.out), tol) << what << " out";
  EXPECT_LT(max_rel(a.lse, b.lse), tol) << what << " lse";
  EXPECT_LT(max_rel(a.dq, b.dq), tol) << what << " dq";
  EXPECT_LT(max_rel(a.dk, b.dk), tol) << what << " dk";
  EXPECT_LT(max_rel(a.dv, b.dv), tol) << what << " dv";
  ASSERT_EQ(a.dhead.defined(), b.dhead.defined()) << what;
  if (a.dhead.defined()) {
    EXPECT_LT(max_rel(a.dhead, b.dhead), tol) << what << " dhead";
  }
  ASSERT_EQ(a.dbias.defined(), b.dbias.defined()) << what;
  if (a.dbias.defined()) {
    EXPECT_LT(max_rel(a.dbias, b.dbias), tol) << what << " dbias";
  }
}

// Fused kernel (rotation from the method, tiles from `cfg`) vs the reference, same inputs.
void compare_to_reference(const std::string& preset, int64_t B, int64_t H, int64_t T, int64_t D,
                          int64_t L, const attention::FusedCpuConfig& cfg, torch::Dtype dtype,
                          double tol) {
  const auto method = attention::resolve_method(options(preset, H, D, L));
  torch::manual_seed(100 + T);
  const auto q = torch::randn({B, H, T, D}, dtype), k = torch::randn({B, H, T, D}, dtype),
             v = torch::randn({B, H, T, D}, dtype);
  const auto wo = torch::randn({B, H, T, D}, dtype), wl = torch::randn({B, H, T}, dtype);
  const Tensor head = method.learned_head_scale() ? some_head_scale(H, dtype) : Tensor();
  const Tensor bias = some_bias_table(method, T, dtype);
  const auto mod = attention::score_mod(method, T);
  const auto slopes = attention::alibi_slope_tensor(method);
  const Kernel fused = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& hs,
                           const Tensor& bp) {
    const auto rot = attention::rotary_tables(method, T, q.options());
    return attention::fused_attention_cpu_with_lse(attention::apply_rotary(q, rot),
                                                   attention::apply_rotary(k, rot), v, mod, hs,
                                                   slopes, bp, cfg);
  };
  const Kernel reference = [&](const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& hs, const Tensor& bp) {
    return attention::reference_attention_with_lse(q, k, v, method, hs, bp);
  };
  const std::string what = preset + " B=" + std::to_string(B) + " H=" + std::to_string(H) +
                           " T=" + std::to_string(T) + " blocks " + std::to_string(cfg.block_q) +
                           "x" + std::to_string(cfg.block_k) + " isa " +
                           attention::fused_cpu_isa();
  expect_close(run(fused, q, k, v, head, bias, wo, wl), run(reference, q, k, v, head, bias, wo, wl), tol,
               what);
}

TEST(AttentionFused, EveryPresetMatchesReferenceFloat32) {
  // T not a multiple of the tiles, T = 1, several heads, batch > 1, T = 4L (ntk/yarn scaled).
  const int64_t L = 24;
  for (const auto& preset : attention::preset_names()) {
    compare_to_reference(preset, 2, 3, 1, 16, L, {16, 16}, torch::kFloat32, 1e-5);
    compare_to_reference(preset, 2, 3, 37, 16, L, {16, 16}, torch::kFloat32, 1e-5);
    compare_to_reference(preset, 1, 2, 4 * L, 16, L, {16, 32}, torch::kFloat32, 1e-5);
    compare_to_reference(preset, 1, 2, 150, 16, L, {}, torch::kFloat32, 1e-5);  // default tiles
  }
}

TEST(AttentionFused, OddShapesMatchReference) {
  // Head dim not a multiple of the vector width, tiles that do not divide each other, a single
  // head (a head's key blocks split across threads in the backward).
  compare_to_reference("si+rope", 1, 1, 77, 6, 20, {24, 16}, torch::kFloat32, 1e-5);
  compare_to_reference("alibi", 1, 1, 50, 5, 20, {7, 16}, torch::kFloat32, 1e-5);
  compare_to_reference("logn+p-rope", 3, 1, 33, 12, 8, {5, 48}, torch::kFloat32, 1e-5);
  compare_to_reference("si+nope", 1, 2, 300, 16, 64, {32, 64}, torch::kFloat32, 1e-5);
  // float64: agreement limited by ScoreMod's float fields (scale, 1/τ), ~1e-7 relative.
  compare_to_reference("yarn", 1, 2, 65, 8, 16, {64, 16}, torch::kFloat64, 1e-6);
}

TEST(AttentionFused, EveryInstructionSetPathMatchesReference) {
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    try {
      attention::set_fused_cpu_isa(isa);
    } catch (const std::invalid_argument&) {
      continue;  // this CPU cannot run it
    }
    EXPECT_EQ(std::string(attention::fused_cpu_isa()), isa);
    for (const char* preset : {"si+p-rope", "alibi", "logn+rope", "yarn", "kerple"}) {
      compare_to_reference(preset, 2, 2, 45, 16, 12, {16, 16}, torch::kFloat32, 1e-5);
      compare_to_reference(preset, 1, 2, 29, 8, 12, {8, 8}, torch::kFloat64, 1e-6);
    }
  }
  attention::set_fused_cpu_isa("auto");
}

// Logit gaps far beyond exp's float range (q scaled up, and ALiBi's steep heads: exp underflows
// to 0) still match the float64 reference, and a NaN in one query stays NaN in its row only, on
// every ISA path (the AVX-512 exp clamps and scales differently from the others).
TEST(AttentionFused, ExtremeLogitsAndNaNOnEveryInstructionSetPath) {
  const int64_t H = 2, T = 70, D = 16;
  const auto method = attention::resolve_method(options("alibi", H, D, 12));
  const auto mod = attention::score_mod(method, T);
  const auto slopes = attention::alibi_slope_tensor(method);
  torch::manual_seed(7);
  const auto q = 30 * torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}),
             v = torch::randn({1, H, T, D});
  const auto expected = std::get<0>(attention::reference_attention_with_lse(q, k, v, method, {}));
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    try {
      attention::set_fused_cpu_isa(isa);
    } catch (const std::invalid_argument&) {
      continue;
    }
    torch::NoGradGuard no_grad;
    const auto out = attention::fused_attention_cpu(q, k, v, mod, {}, slopes, {}, {16, 16});
    EXPECT_LT(max_rel(out, expected), 1e-4) << isa;
    auto q_nan = q.clone();
    q_nan[0][1][40][3] = std::nan("");
    const auto out_nan = attention::fused_attention_cpu(q_nan, k, v, mod, {}, slopes, {}, {16, 16});
    EXPECT_TRUE(out_nan[0][1][40].isnan().all().item<bool>()) << isa;
    EXPECT_EQ(out_nan.isnan().sum().item<int64_t>(), D) << isa << ": only row 40 of head 1";
  }
  attention::set_fused_cpu_isa("auto");
}

// ---- finite-difference gradient checks (float64) -----------------------------------------------

// Central differences of f over every element of every input vs the analytic gradient.
void gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
               std::vector<Tensor> inputs, const std::string& what) {
  for (auto& x : inputs) x = x.detach().clone().requires_grad_();
  f(inputs).backward();
  const double eps = 1e-6;
  torch::NoGradGuard no_grad;
  for (size_t n = 0; n < inputs.size(); ++n) {
    Tensor g = inputs[n].grad();
    ASSERT_TRUE(g.defined()) << what << " input " << n;
    double* x = inputs[n].data_ptr<double>();
    double worst = 0;
    for (int64_t e = 0; e < inputs[n].numel(); ++e) {
      const double x0 = x[e];
      x[e] = x0 + eps;
      const double up = f(inputs).item<double>();
      x[e] = x0 - eps;
      const double down = f(inputs).item<double>();
      x[e] = x0;
      const double numeric = (up - down) / (2 * eps), analytic = g.view(-1)[e].item<double>();
      worst = std::max(worst, std::abs(numeric - analytic) / (1e-6 + std::abs(numeric)));
      ASSERT_NEAR(analytic, numeric, 1e-6 + 1e-5 * std::abs(numeric))
          << what << " input " << n << " element " << e;
    }
  }
}

TEST(AttentionFused, GradcheckFloat64EveryPreset) {
  const int64_t B = 2, H = 2, T = 11, D = 4, L = 4;  // T > L: ntk/yarn branches
  for (const auto& preset : attention::preset_names()) {
    const auto method = attention::resolve_method(options(preset, H, D, L));
    const auto mod = attention::score_mod(method, T);
    const auto slopes = attention::alibi_slope_tensor(method);
    torch::manual_seed(7);
    const auto wo = torch::randn({B, H, T, D}, torch::kFloat64);
    const auto wl = torch::randn({B, H, T}, torch::kFloat64);
    std::vector<Tensor> inputs = {torch::randn({B, H, T, D}, torch::kFloat64),
                                  torch::randn({B, H, T, D}, torch::kFloat64),
                                  torch::randn({B, H, T, D}, torch::kFloat64)};
    // Learned inputs after q, k, v: the head scale (LogN) or the bias table (KERPLE, T5).
    if (method.learned_head_scale()) inputs.push_back(some_head_scale(H, torch::kFloat64));
    if (method.learned_bias()) inputs.push_back(some_bias_table(method, T, torch::kFloat64));
    const auto rot = attention::rotary_tables(method, T, torch::kFloat64);
    auto f = [&](const std::vector<Tensor>& in) {
      const Tensor hs = method.learned_head_scale() ? in[3] : Tensor();
      const Tensor bp = method.learned_bias() ? in[3] : Tensor();
      auto [out, lse] = attention::fused_attention_cpu_with_lse(
          attention::apply_rotary(in[0], rot), attention::apply_rotary(in[1], rot), in[2], mod, hs,
          slopes, bp, {4, 8});
      return (out * wo).sum() + (lse * wl).sum();
    };
    gradcheck(f, inputs, preset);
  }
}

TEST(AttentionFused, GradcheckFloat64SingleTokenAndSingleHead) {
  for (int64_t T : {1, 2, 9}) {
    const auto method = attention::resolve_method(options("logn+ntk", 1, 6, 3));
    const auto mod = attention::score_mod(method, T);
    const auto rot = attention::rotary_tables(method, T, torch::kFloat64);
    torch::manual_seed(T);
    const auto wo = torch::randn({1, 1, T, 6}, torch::kFloat64);
    auto f = [&](const std::vector<Tensor>& in) {
      return (attention::fused_attention_cpu(attention::apply_rotary(in[0], rot),
                                             attention::apply_rotary(in[1], rot), in[2], mod,
                                             in[3], {}, {}, {8, 8}) *
              wo)
          .sum();
    };
    gradcheck(f,
              {torch::randn({1, 1, T, 6}, torch::kFloat64), torch::randn({1, 1, T, 6}, torch::kFloat64),
               torch::randn({1, 1, T, 6}, torch::kFloat64), torch::tensor({0.7}, torch::kFloat64)},
              "T=" + std::to_string(T));
  }
}

// ---- the module ---------------------------------------------------------------------------------

TEST(AttentionFused, ModuleFusedMatchesModuleReference) {
  const int64_t B = 2, H = 3, D = 16, L = 32;
  for (const auto& preset : attention::preset_names()) {
    for (int64_t T : {int64_t(1), int64_t(100), 4 * L}) {
      attention::CausalAttention fused(options(preset, H, D, L, "fused"));
      attention::CausalAttention reference(options(preset, H, D, L, "reference"));
      {
        torch::NoGradGuard g;
        if (fused->logn_scale.defined()) {
          fused->logn_scale.copy_(some_head_scale(H, torch::kFloat32));
          reference->logn_scale.copy_(some_head_scale(H, torch::kFloat32));
        }
      }
      move_learned_bias({&fused, &reference});
      torch::manual_seed(T);
      // Non-contiguous inputs, as the model passes them ((B, T, H, D) viewed as (B, H, T, D)).
      const auto q = torch::randn({B, T, H, D}).transpose(1, 2);
      const auto k = torch::randn({B, T, H, D}).transpose(1, 2);
      const auto v = torch::randn({B, T, H, D}).transpose(1, 2);
      const auto wo = torch::randn({B, H, T, D}), wl = torch::randn({B, H, T});
      auto go = [&](attention::CausalAttention& m) {
        const Kernel kern = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                                const Tensor&) { return m->forward_with_lse(q, k, v); };
        Result r = run(kern, q, k, v, Tensor(), Tensor(), wo, wl);
        if (m->logn_scale.defined()) r.dhead = m->logn_scale.grad().clone();
        std::vector<Tensor> dparams;
        for (const auto& p : m->learned_bias_params) dparams.push_back(p.grad().flatten());
        if (!dparams.empty()) r.dbias = torch::cat(dparams);
        return r;
      };
      const std::string what = preset + " T=" + std::to_string(T);
      expect_close(go(fused), go(reference), 1e-5, what);
      // forward == forward_with_lse's output.
      torch::NoGradGuard g;
      EXPECT_TRUE(fused->forward(q, k, v).equal(std::get<0>(fused->forward_with_lse(q, k, v))));
    }
  }
}

TEST(AttentionFused, ModuleGradcheckThroughRotationFloat64) {
  for (const char* preset : {"logn+p-rope", "yarn", "si+rope", "kerple+p-rope", "t5", "fire"}) {
    const int64_t H = 2, D = 8, L = 4, T = 20;  // T > 16: two of T5's logarithmic buckets
    attention::CausalAttention attn(options(preset, H, D, L, "fused"));
    attn->to(torch::kFloat64);
    move_learned_bias({&attn});
    torch::manual_seed(11);
    const auto wo = torch::randn({1, H, T, D}, torch::kFloat64);
    std::vector<Tensor> inputs = {torch::randn({1, H, T, D}, torch::kFloat64),
                                  torch::randn({1, H, T, D}, torch::kFloat64),
                                  torch::randn({1, H, T, D}, torch::kFloat64)};
    auto f = [&](const std::vector<Tensor>& in) { return (attn->forward(in[0], in[1], in[2]) * wo).sum(); };
    gradcheck(f, inputs, preset);
    // d loss / d the method's learned parameters (logn_scale; kerple_r1, kerple_r2; t5_bias; fire_*,
    // through the table learned_bias.h builds) by finite differences on every value.
    std::vector<std::pair<std::string, Tensor>> learned;
    if (attn->logn_scale.defined()) learned.push_back({"logn_scale", attn->logn_scale});
    const auto& rows = attention::transform_spec(attn->method().transform).learned;
    for (size_t n = 0; n < attn->learned_bias_params.size(); ++n)
      learned.push_back({rows[n].name, attn->learned_bias_params[n]});
    for (auto& [name, param] : learned) {
      attn->zero_grad();
      f(inputs).backward();
      const Tensor g = param.grad().flatten().clone();
      torch::NoGradGuard ng;
      for (int64_t e = 0; e < param.numel(); ++e) {
        double* p = param.data_ptr<double>();
        const double p0 = p[e];
        p[e] = p0 + 1e-6;
        const double up = f(inputs).item<double>();
        p[e] = p0 - 1e-6;
        const double down = f(inputs).item<double>();
        p[e] = p0;
        EXPECT_NEAR(g[e].item<double>(), (up - down) / 2e-6, 1e-6 + 1e-5 * std::abs(g[e].item<double>()))
            << preset << " " << name << " value " << e;
      }
    }
  }
}

TEST(AttentionFused, NoGradInferenceAndLongContext) {
  // 16× the training context in inference mode: runs without a graph and agrees with the
  // reference on a few rows (the reference on T = 2048 is still small enough).
  const int64_t L = 128, T = 16 * L, H = 2, D = 16;
  attention::CausalAttention fused(options("si+p-rope", H, D, L, "fused"));
  attention::CausalAttention reference(options("si+p-rope", H, D, L, "reference"));
  torch::manual_seed(5);
  const auto q = torch::randn({1, H, T, D}), k = torch::randn({1, H, T, D}),
             v = torch::randn({1, H, T, D});
  torch::NoGradGuard g;
  const auto [out, lse] = fused->forward_with_lse(q, k, v);
  const auto [ref_out, ref_lse] = reference->forward_with_lse(q, k, v);
  EXPECT_LT(max_rel(out, ref_out), 1e-5);
  EXPECT_LT(max_rel(lse, ref_lse), 1e-5);
  EXPECT_FALSE(out.requires_grad());
}

TEST(AttentionFused, ScoreStdExactForShortAndSampledForLong) {
  const int64_t H = 2, D = 16;
  for (int64_t T : {int64_t(50), int64_t(600)}) {
    attention::CausalAttention attn(options("si+rope", H, D, 64));
    attention::AttentionProbe probe;
    probe.score_std = true;
    torch::manual_seed(9);
    const auto q = torch::randn({2, H, T, D}), k = torch::randn({2, H, T, D}) * 1.7;
    attn->forward(q, k, torch::randn({2, H, T, D}), &probe);
    // Exact std over all causal pairs of the rotated q, k.
    const auto [qr, kr] = attn->rotate(q, k);
    const auto s = torch::matmul(qr.to(torch::kFloat64), kr.to(torch::kFloat64).transpose(-1, -2)) /
                   std::sqrt(double(D));
    const auto mask = torch::ones({T, T}, torch::kBool).tril();
    const double exact = s.masked_select(mask.expand_as(s)).std().item<double>();
    if (T * (T + 1) / 2 <= 4096) {
      EXPECT_NEAR(probe.score_std_value, exact, 1e-9 * exact) << T;
    } else {
      EXPECT_NEAR(probe.score_std_value, exact, 0.05 * exact) << T;  // 4096 samples × B·H
    }
    EXPECT_NEAR(exact, 1.7, 0.15);  // q, k ~ N(0, 1), N(0, 1.7²): s has std 1.7
  }
}

}  // namespace
