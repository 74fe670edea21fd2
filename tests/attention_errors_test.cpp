// Bad input is rejected with std::invalid_argument before any computation, with a message that
// says what is wrong (and lists the valid names for unknown ones).
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/fused_cpu.h"
#include "attention/inspect.h"
#include "attention/method.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>

namespace {

attention::MethodOptions opts(const std::string& method) {
  attention::MethodOptions o;
  o.method = method;
  o.heads = 2;
  o.head_dim = 8;
  o.train_context = 64;
  return o;
}

// Expects std::invalid_argument whose message contains every needle.
template <class F>
void expect_invalid(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg << " / " << n;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

void construct(const attention::MethodOptions& o) { attention::CausalAttention attn(o); }

TEST(AttentionErrors, UnknownNamesListTheValidOnes) {
  auto o = opts("si+pope");
  expect_invalid([&] { construct(o); }, {"si+pope", "si+p-rope", "logn+ntk", "rope+ntk", "yarn"});
  o = opts("rope");
  o.positional = "xpos";
  expect_invalid([&] { construct(o); }, {"xpos", "nope", "p-rope", "ntk", "yarn", "alibi"});
  o = opts("rope");
  o.transform = "ssmax";
  expect_invalid([&] { construct(o); }, {"ssmax", "none", "logn", "scale-invariant", "infoscale"});
  o = opts("p-rope");
  o.p_rope_variant = "both";
  expect_invalid([&] { construct(o); }, {"both", "respread", "truncate"});
  o = opts("rope");
  o.kernel = "flash";
  expect_invalid([&] { construct(o); }, {"flash", "reference", "fused", "cuda"});
}

TEST(AttentionErrors, BadTau) {
  for (double tau : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto o = opts("si+p-rope");
    o.parameters[attention::Parameter::kTau] = tau;
    expect_invalid([&] { construct(o); }, {"tau"});
  }
  auto o = opts("rope");  // τ is irrelevant without the scale-invariant transform
  o.parameters[attention::Parameter::kTau] = -1;
  EXPECT_NO_THROW(construct(o));
}

TEST(AttentionErrors, BadPRopeFraction) {
  for (double p : {1.5, std::nan("")}) {
    auto o = opts("p-rope");
    o.p_rope_fraction = p;
    expect_invalid([&] { construct(o); }, {"p_rope_fraction", "[0, 1]"});
  }
  auto o = opts("p-rope");
  o.p_rope_fraction = 1.0;  // the boundary is valid
  EXPECT_NO_THROW(construct(o));
  o.p_rope_fraction = -1.0;  // the variant's default
  EXPECT_NO_THROW(construct(o));
}

TEST(AttentionErrors, OddHeadDimWithRotaryEncodings) {
  for (const char* m : {"rope", "p-rope", "rope+ntk", "yarn", "logn+rope", "si+p-rope"}) {
    auto o = opts(m);
    o.head_dim = 7;
    expect_invalid([&] { construct(o); }, {"head_dim", "even", "7"});
  }
  for (const char* m : {"nope", "alibi", "si+nope"}) {
    auto o = opts(m);
    o.head_dim = 7;
    EXPECT_NO_THROW(construct(o)) << m;
  }
}

TEST(AttentionErrors, MissingTrainContext) {
  for (const char* m : {"rope+ntk", "yarn", "logn+rope", "logn+p-rope", "logn+ntk"}) {
    auto o = opts(m);
    o.train_context = 0;
    expect_invalid([&] { construct(o); }, {"train_context", m});
  }
  auto o = opts("rope");
  o.transform = "infoscale";
  o.train_context = 0;
  expect_invalid([&] { construct(o); }, {"train_context"});
  for (const char* m : {"rope", "p-rope", "nope", "alibi", "si+p-rope"}) {  // do not need L
    auto ok = opts(m);
    ok.train_context = 0;
    EXPECT_NO_THROW(construct(ok)) << m;
  }
}

TEST(AttentionErrors, OtherBadOptions) {
  auto o = opts("rope");
  o.parameters[attention::Parameter::kRopeBase] = 1.0;
  expect_invalid([&] { construct(o); }, {"rope_base"});
  o = opts("rope");
  o.score_scale = -0.1;
  expect_invalid([&] { construct(o); }, {"score_scale"});
  o = opts("rope");
  o.heads = 0;
  expect_invalid([&] { construct(o); }, {"heads"});
}

#ifndef HARNESS_WITH_CUDA_KERNEL
TEST(AttentionErrors, CudaKernelUnavailableInThisBuild) {
  auto o = opts("rope");
  o.kernel = "cuda";
  expect_invalid([&] { construct(o); }, {"no CUDA kernel"});
}
#endif

TEST(AttentionErrors, ContextTooLongOrEmpty) {
  auto o = opts("rope");
  o.heads = 1;
  o.head_dim = 2;
  attention::CausalAttention attn(o);
  const int64_t T = attention::kMaxContext + 1;
  const auto x = torch::zeros({1, 1, T, 2});  // 8 MB; rejected before any attention work
  expect_invalid([&] { attn->forward(x, x, x); }, {"context length", "1048576"});
  const auto empty = torch::zeros({1, 1, 0, 2});
  expect_invalid([&] { attn->forward(empty, empty, empty); }, {"context length"});
  expect_invalid([&] { attention::inspect_method(o, {1}, T); }, {"context length"});
}

TEST(AttentionErrors, ShapeMismatches) {
  attention::CausalAttention attn(opts("si+p-rope"));  // heads 2, head_dim 8
  const auto good = torch::randn({1, 2, 5, 8});
  EXPECT_NO_THROW(attn->forward(good, good, good));
  const auto wrong_heads = torch::randn({1, 3, 5, 8});
  expect_invalid([&] { attn->forward(wrong_heads, wrong_heads, wrong_heads); },
                 {"H = 3", "heads = 2"});
  const auto wrong_dim = torch::randn({1, 2, 5, 4});
  expect_invalid([&] { attn->forward(wrong_dim, wrong_dim, wrong_dim); }, {"D = 4"});
  expect_invalid([&] { attn->forward(good, good, torch::randn({1, 2, 6, 8})); }, {"(B, H, T, D)"});
  expect_invalid([&] { attn->forward(good[0], good[0], good[0]); }, {"(B, H, T, D)"});
}

TEST(AttentionErrors, FusedKernelInputs) {
  const attention::ScoreMod mod;
  const auto x = torch::randn({1, 2, 5, 8});
  expect_invalid([&] { attention::fused_attention_cpu(x.to(torch::kInt), x.to(torch::kInt), x.to(torch::kInt), mod); },
                 {"float32 or float64"});
  expect_invalid([&] { attention::fused_attention_cpu(x, x.to(torch::kFloat64), x, mod); }, {"dtype"});
  expect_invalid([&] { attention::fused_attention_cpu(x, x, x, mod, torch::ones({3})); }, {"head_scale"});
  expect_invalid([&] { attention::fused_attention_cpu(x, x, x, mod, {}, torch::ones({1})); },
                 {"alibi_slopes"});
  expect_invalid([&] { attention::set_fused_cpu_isa("sse9"); }, {"sse9", "generic"});
}

TEST(AttentionErrors, InspectRejectsNegativeDistances) {
  expect_invalid([&] { attention::inspect_method(opts("si+p-rope"), {-1}, 100); }, {"distances"});
}

}  // namespace
