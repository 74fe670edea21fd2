// Rotary tables and ALiBi slopes are built on the device they are used on: no host tensor, no
// host→device copy inside a training step (a blocking copy there fails HARNESS_CUDA_SYNC_CHECK on
// a GPU; docs/gpu.md). Checked here on the meta device (shapes only, no data) while every CPU
// allocation is counted: the old construction (float64 tables on the host, then .to(device))
// allocated on the CPU and fails. On the CPU the values are those of the float64 formulas.
// The decode path (forward_cached: rows attending over a KV cache) builds its logits the same way,
// on the rows' device: every row it returns is the float64 reference forward's, for every method.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/method.h"
#include "attention/method_tensors.h"
#include "attention/reference.h"
#include "test_models.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace {

using attention::Method;
using attention::MethodOptions;

// (heads, head_dim, L) in this file's order.
MethodOptions options_for(const std::string& method, int64_t heads, int64_t head_dim, int64_t L) {
  return test_support::method_options(method, head_dim, L, heads);
}

// The CPU allocator with a count of its allocations (it hands them to the allocator it replaces).
class CountingCpuAllocator : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) override {
    ++count;
    largest = std::max<int64_t>(largest, int64_t(n));
    return inner_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t n) const override { inner_->copy_data(dest, src, n); }
  int64_t count = 0;
  int64_t largest = 0;  // bytes

 private:
  c10::Allocator* inner_;
};

struct HostAllocations {
  int64_t count = 0;
  int64_t largest = 0;  // bytes
};

// The CPU tensors `fn` allocates. Priority 200: above the default allocator's, then the default is
// put back at the same priority.
HostAllocations host_allocations_during(const std::function<void()>& fn) {
  c10::Allocator* original = c10::GetCPUAllocator();
  CountingCpuAllocator counting(original);
  c10::SetCPUAllocator(&counting, 200);
  try {
    fn();
  } catch (...) {
    c10::SetCPUAllocator(original, 200);
    throw;
  }
  c10::SetCPUAllocator(original, 200);
  return {counting.count, counting.largest};
}

int64_t cpu_allocations_during(const std::function<void()>& fn) { return host_allocations_during(fn).count; }

const auto kMeta = torch::TensorOptions().device(torch::kMeta);

TEST(AttentionDeviceTables, CountingAllocatorSeesAHostTensor) {  // the measure itself can fail
  EXPECT_GE(cpu_allocations_during([] { (void)torch::tensor(std::vector<double>{1.0, 2.0}).to(torch::kMeta); }), 1);
  EXPECT_EQ(cpu_allocations_during([] { (void)torch::empty({3}, kMeta).fill_(2.0); }), 0);
  // A host table of a decode step's (1, 21) logits: 21 float64 values, larger than a scalar's 8 bytes.
  EXPECT_GE(host_allocations_during([] { (void)torch::zeros({1, 21}, torch::kFloat64).to(torch::kMeta); }).largest, 21 * 8);
}

TEST(AttentionDeviceTables, RotaryTablesAreBuiltOnTheMetaDeviceWithoutAHostTensor) {
  for (const char* name : {"rope", "p-rope", "rope+ntk", "yarn"}) {
    const Method m = attention::resolve_method(options_for(name, 2, 16, 32));
    for (const int64_t T : {32, 128}) {  // the training context, and 4L (NTK / YaRN rescaled)
      for (const auto dtype : {torch::kFloat32, torch::kFloat64}) {
        attention::RotaryTables tables;
        const int64_t allocations =
            cpu_allocations_during([&] { tables = attention::rotary_tables(m, T, kMeta.dtype(dtype)); });
        EXPECT_EQ(allocations, 0) << name << " T = " << T;
        ASSERT_TRUE(tables.defined()) << name;
        EXPECT_EQ(tables.cos.device().type(), torch::kMeta) << name;
        EXPECT_EQ(tables.sin.scalar_type(), dtype) << name;
        EXPECT_EQ(tables.cos.sizes(), (std::vector<int64_t>{T, 8})) << name;
      }
    }
  }
}

// The module's path in a step: q, k at the training context, rotated with its cached tables.
TEST(AttentionDeviceTables, ModuleRotatesMetaTensorsWithoutAHostTensor) {
  for (const char* name : {"rope", "p-rope"}) {
    attention::CausalAttention attn(options_for(name, 2, 16, 32));
    const auto q = torch::empty({1, 2, 32, 16}, kMeta), k = torch::empty({1, 2, 32, 16}, kMeta);
    for (int step = 0; step < 2; ++step) {  // building the cached tables, then reading them
      std::pair<torch::Tensor, torch::Tensor> rotated;
      EXPECT_EQ(cpu_allocations_during([&] { rotated = attn->rotate(q, k); }), 0) << name << " step " << step;
      EXPECT_EQ(rotated.first.device().type(), torch::kMeta) << name;
      EXPECT_EQ(rotated.second.sizes(), q.sizes()) << name;
    }
  }
}

TEST(AttentionDeviceTables, AlibiSlopesAreBuiltOnTheMetaDeviceWithoutAHostTensor) {
  for (const int64_t H : {6, 8, 12}) {  // powers of 2 and not (the interleaved extra slopes)
    const Method m = attention::resolve_method(options_for("alibi", H, 16, 32));
    torch::Tensor slopes;
    EXPECT_EQ(cpu_allocations_during([&] { slopes = attention::alibi_slope_tensor(m, kMeta.dtype(torch::kFloat32)); }), 0);
    EXPECT_EQ(slopes.device().type(), torch::kMeta);
    EXPECT_EQ(slopes.sizes(), (std::vector<int64_t>{H}));
    EXPECT_EQ(slopes.scalar_type(), torch::kFloat32);
  }
  const Method rope = attention::resolve_method(options_for("rope", 2, 16, 32));
  EXPECT_FALSE(attention::alibi_slope_tensor(rope, kMeta).defined());
}

// On the CPU: the slopes exactly (float64, and float32 as the kernels get them), the tables
// against cos/sin of i·freq_k in float64 (std::cos; torch's vectorised cos may differ in the last
// bit) and, in float32, against that value rounded.
TEST(AttentionDeviceTables, CpuValuesAreTheFloat64Formulas) {
  for (const int64_t H : {6, 8}) {
    const Method m = attention::resolve_method(options_for("alibi", H, 16, 32));
    const std::vector<double> want = attention::alibi_slopes(H);
    const auto f64 = attention::alibi_slope_tensor(m);
    const auto f32 = attention::alibi_slope_tensor(m, torch::kFloat32);
    ASSERT_EQ(f64.numel(), H);
    for (int64_t h = 0; h < H; ++h) {
      EXPECT_EQ(f64[h].item<double>(), want[size_t(h)]) << "H = " << H << " head " << h;
      EXPECT_EQ(f32[h].item<float>(), float(want[size_t(h)])) << "H = " << H << " head " << h;
    }
  }
  for (const char* name : {"rope", "p-rope", "yarn"}) {
    const Method m = attention::resolve_method(options_for(name, 2, 16, 32));
    const int64_t T = 128;
    const std::vector<double> freq = attention::rotary_frequencies(m, T);
    const auto t64 = attention::rotary_tables(m, T, torch::kFloat64);
    const auto t32 = attention::rotary_tables(m, T, torch::kFloat32);
    const auto c64 = t64.cos.accessor<double, 2>(), s64 = t64.sin.accessor<double, 2>();
    const auto c32 = t32.cos.accessor<float, 2>(), s32 = t32.sin.accessor<float, 2>();
    for (int64_t i = 0; i < T; ++i)
      for (int64_t k = 0; k < int64_t(freq.size()); ++k) {
        const double angle = double(i) * freq[size_t(k)];
        ASSERT_NEAR(c64[i][k], std::cos(angle), 1e-15) << name << " i = " << i << " k = " << k;
        ASSERT_NEAR(s64[i][k], std::sin(angle), 1e-15) << name << " i = " << i << " k = " << k;
        ASSERT_NEAR(c32[i][k], std::cos(angle), 6e-8) << name << " i = " << i << " k = " << k;
        ASSERT_NEAR(s32[i][k], std::sin(angle), 6e-8) << name << " i = " << i << " k = " << k;
      }
  }
}

// ---- the decode path -------------------------------------------------------------------------

// Every method that has a bias table, a learned scale or a per-distance transform, and the rotary
// ones (their rows are rotated for the sequence's context).
std::vector<std::string> decode_methods() { return attention::preset_names(); }

// The module's learned parameters (head scale, bias parameters) moved off their initial values, so
// the decode path must read the module's own.
void move_learned(attention::CausalAttention& attn) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = attn->learned_bias_params;
  if (attn->logn_scale.defined()) params.push_back(attn->logn_scale);
  for (auto& p : params) {
    const auto ramp = torch::arange(p.numel(), p.options()).view(p.sizes()) / double(p.numel());
    p.copy_(p * 0.8 + 0.15 * ramp + 0.1);
  }
}

// Decoding a sequence of length `context` through the KV cache — a prefill, then one row at a
// time, then a few at once — gives every row of the float64 reference forward over the whole
// sequence (reference.h, the oracle: rotation at T, the closed forms, the learned tables).
TEST(AttentionDecode, EveryRowIsTheFloat64ReferenceForward) {
  const int64_t H = 2, D = 16, L = 16;
  for (const std::string& name : decode_methods()) {
    auto o = options_for(name, H, D, L);
    o.kernel = "reference";
    attention::CausalAttention attn(o);
    attn->to(torch::kFloat64);
    move_learned(attn);
    for (const int64_t T : {int64_t(12), int64_t(40)}) {  // inside L, and beyond it (NTK, YaRN rescale)
      torch::manual_seed(5);
      const auto q = torch::randn({2, H, T, D}, torch::kFloat64), k = torch::randn({2, H, T, D}, torch::kFloat64),
                 v = torch::randn({2, H, T, D}, torch::kFloat64);
      torch::NoGradGuard no_grad;
      const auto want = attention::reference_attention(q, k, v, attn->method(), attn->logn_scale, attn->bias_table(T));
      torch::Tensor k_cache, v_cache;
      std::vector<std::pair<int64_t, int64_t>> chunks = {{0, T / 2}};  // [start, end): the prefill
      for (int64_t i = T / 2; i < T - 3; ++i) chunks.push_back({i, i + 1});
      chunks.push_back({T - 3, T});
      for (const auto& [a, b] : chunks) {
        const auto got = attn->forward_cached(q.slice(2, a, b), k.slice(2, a, b), v.slice(2, a, b), k_cache, v_cache, T);
        const double err = (got - want.slice(2, a, b)).abs().max().item<double>();
        EXPECT_LT(err, 1e-12) << name << " T = " << T << " rows [" << a << ", " << b << ")";
      }
      EXPECT_EQ(k_cache.size(2), T) << name;
    }
  }
}

// The decode path makes its logits on the device of the rows: on the meta device (shapes only) a
// decode step allocates no host tensor the size of a table — the old construction (float64 (n, Tk)
// and (H, n, Tk) tables on the host, the learned table copied to a host vector) did.
TEST(AttentionDecode, MakesNoHostTableOnTheMetaDevice) {
  const int64_t H = 2, D = 16, L = 16, start = 20;
  for (const char* name : {"alibi", "kerple", "t5", "fire", "si+p-rope", "si+nope", "logn+rope", "yarn"}) {
    auto o = options_for(name, H, D, L);
    o.kernel = "reference";
    attention::CausalAttention attn(o);
    // The learned parameters the decode path reads, on the meta device (Module::to cannot move a
    // parameter there: set_data refuses the tensor type).
    for (auto& p : attn->learned_bias_params) p = torch::empty(p.sizes(), kMeta);
    if (attn->logn_scale.defined()) attn->logn_scale = torch::empty(attn->logn_scale.sizes(), kMeta);
    const auto row = torch::empty({1, H, 1, D}, kMeta);
    torch::Tensor k_cache = torch::empty({1, H, start, D}, kMeta), v_cache = torch::empty({1, H, start, D}, kMeta);
    torch::Tensor out;
    torch::NoGradGuard no_grad;
    // What building the learned table allocates on the host (training builds it so too: T5's
    // bucket index, learned_bias.cpp), and what a decode step allocates.
    const HostAllocations table = host_allocations_during([&] { (void)attn->bias_table(start + 1); });
    const HostAllocations host =
        host_allocations_during([&] { out = attn->forward_cached(row, row, row, k_cache, v_cache, 64); });
    // Nothing larger: a scalar operand may be wrapped in a 0-dim host tensor (8 bytes), a row of
    // a float64 table is (start + 1)·8 bytes and the old (H, 1, start + 1) bias table twice that.
    EXPECT_LE(host.largest, std::max<int64_t>(table.largest, 8))
        << name << ": " << host.count << " host allocations, the table's " << table.count;
    EXPECT_EQ(out.device().type(), torch::kMeta) << name;
    EXPECT_EQ(out.sizes(), row.sizes()) << name;
    EXPECT_EQ(k_cache.size(2), start + 1) << name;
  }
}

}  // namespace
