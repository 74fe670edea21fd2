// Rotary tables and ALiBi slopes are built on the device they are used on: no host tensor, no
// host→device copy inside a training step (a blocking copy there fails HARNESS_CUDA_SYNC_CHECK on
// a GPU; docs/gpu.md). Checked here on the meta device (shapes only, no data) while every CPU
// allocation is counted: the old construction (float64 tables on the host, then .to(device))
// allocated on the CPU and fails. On the CPU the values are those of the float64 formulas.
#include <gtest/gtest.h>

#include "attention/attention.h"
#include "attention/method.h"
#include "attention/method_tensors.h"
#include "test_models.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

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
    return inner_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t n) const override { inner_->copy_data(dest, src, n); }
  int64_t count = 0;

 private:
  c10::Allocator* inner_;
};

// How many CPU tensors `fn` allocates. Priority 200: above the default allocator's, then the
// default is put back at the same priority.
int64_t cpu_allocations_during(const std::function<void()>& fn) {
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
  return counting.count;
}

const auto kMeta = torch::TensorOptions().device(torch::kMeta);

TEST(AttentionDeviceTables, CountingAllocatorSeesAHostTensor) {  // the measure itself can fail
  EXPECT_GE(cpu_allocations_during([] { (void)torch::tensor(std::vector<double>{1.0, 2.0}).to(torch::kMeta); }), 1);
  EXPECT_EQ(cpu_allocations_during([] { (void)torch::empty({3}, kMeta).fill_(2.0); }), 0);
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

}  // namespace
