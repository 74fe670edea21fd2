// Checks the fused CUDA attention kernels (forward o and lse; backward dq, dk, dv, dhead_scale,
// dbias_table: d loss/d table of a learned distance bias or of a FIRE table)
// against a float64 CPU implementation written straight from the formulas of score_mod.h, for
// fp32 and bf16, D ∈ {64, 128}, T ∈ {1, 37, 200} (T = 37 and 200 are not multiples of the 64-tile)
// and, for bf16, T = 4096 too (B = H = 1 and a subset of the score mods, to bound the float64
// reference's time), with the score mods of the method registry's rows (attention/method.h,
// torch-free), as a run resolves them; a FIRE row reads a random table (G = 33, fire_table.h).
// bf16 runs the tensor-core kernels on sm_80+ and the SIMT kernels below (fused_attention.cu
// dispatches); fp32 always runs SIMT. Torch-free: CUDA runtime and the registry only.
//
// Each case has an id, dtype/D/T/score mod (bf16/64/37/alibi), printed on its line; its inputs are
// seeded from that id, so `attention_cuda_test --case ID` (a substring: --case bf16/128/ runs every
// bf16 D = 128 case) reruns it alone with the same numbers, e.g. under compute-sanitizer. The first
// cases are bf16 ones that isolate what the host emulation of the tensor-core kernels cannot check
// (tc_first_contact below); a failing one prints what it points at.
//
// Exit codes: 0 pass, 1 fail, 2 bad arguments (or no case matches --case), 77 skipped (no CUDA
// device).
#include "tests/cuda/relative_error.h"
#include "tests/cuda/fire_table.h"
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention/cuda/fused_attention.cuh"
#include "attention/cuda/fused_attention_tc.cuh"
#include "attention/method.h"
#include "attention/score_mod.h"

namespace {

using attention::ScoreMod;
using attention::cuda::DType;
using attention::cuda::FusedArgs;

constexpr int kSkipped = 77;
constexpr int kBatch = 2;  // B and H of the short cases; the T = 4096 case runs B = H = 1
constexpr int kHeads = 3;  // (and the per-head arrays below hold kHeads entries either way)
constexpr int kLongSeqLen = 4096;
constexpr int kFireGrid = 33;  // G of the FIRE case

// A seed from a case id (FNV-1a), so that a case's random inputs do not depend on which cases ran.
uint32_t seed_of(const std::string& id) {
  uint32_t h = 2166136261u;
  for (const char ch : id) h = (h ^ static_cast<unsigned char>(ch)) * 16777619u;
  return h;
}

// ---------------------------------------------------------------------------------------------
// Host-side bf16 (round to nearest even), so the test needs no cuda_bf16 host code.

uint16_t float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t x) {
  const uint32_t bits = static_cast<uint32_t>(x) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

// ---------------------------------------------------------------------------------------------
// float64 reference.

struct Result {
  std::vector<double> o, lse, dq, dk, dv, dhead_scale;  // (B,H,T,D) ×4 but lse (B,H,T), dhs (H)
  // d loss/d bias_table: (H, T) d loss / d logit(i, i − t), summed over batch and i; (H, G + 2)
  // for a FIRE table
  std::vector<double> dbias;
};

// `mod` holds HOST pointers for head_scale / alibi_slope / bias_table here.
Result reference(const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& v, const std::vector<double>& d_o, const ScoreMod& mod,
                 int batch, int heads, int seq_len, int head_dim) {
  const size_t elems = static_cast<size_t>(batch) * heads * seq_len * head_dim;
  const attention::cuda::test::FireReference fire(mod, heads);  // FIRE's terms in float64
  const ScoreMod plain = attention::cuda::test::without_query_bias(mod);
  const int dbias_len = fire.active() ? fire.len : seq_len;
  Result r;
  r.o.assign(elems, 0.0);
  r.dq.assign(elems, 0.0);
  r.dk.assign(elems, 0.0);
  r.dv.assign(elems, 0.0);
  r.lse.assign(static_cast<size_t>(batch) * heads * seq_len, 0.0);
  r.dhead_scale.assign(heads, 0.0);
  r.dbias.assign(static_cast<size_t>(heads) * dbias_len, 0.0);
  std::vector<double> dots, probs, dprobs;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const size_t head = (static_cast<size_t>(b) * heads + h) * seq_len;  // first row
      auto row = [&](const std::vector<double>& x, int i) { return &x[(head + i) * head_dim]; };
      auto mutable_row = [&](std::vector<double>& x, int i) { return &x[(head + i) * head_dim]; };
      for (int i = 0; i < seq_len; ++i) {
        // logits over the visible keys j <= i
        dots.assign(i + 1, 0.0);
        probs.assign(i + 1, 0.0);
        dprobs.assign(i + 1, 0.0);
        double max_logit = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int d = 0; d < head_dim; ++d) dot += row(q, i)[d] * row(k, j)[d];
          dots[j] = dot;
          probs[j] = attention::logit<double>(plain, dot, i, j, h) + (fire.active() ? fire.bias(h, i, i - j) : 0);
          max_logit = std::max(max_logit, probs[j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += std::exp(probs[j] - max_logit);
        const double lse = max_logit + std::log(sum);
        r.lse[head + i] = lse;
        for (int j = 0; j <= i; ++j) probs[j] = std::exp(probs[j] - lse);
        // o_i = Σ_j P_ij v_j
        for (int j = 0; j <= i; ++j) {
          for (int d = 0; d < head_dim; ++d) mutable_row(r.o, i)[d] += probs[j] * row(v, j)[d];
        }
        // dP_ij = dO_i·v_j, dLogit_ij = P_ij (dP_ij − Σ_k P_ik dP_ik)
        double delta = 0.0;
        for (int j = 0; j <= i; ++j) {
          double dp = 0.0;
          for (int d = 0; d < head_dim; ++d) dp += row(d_o, i)[d] * row(v, j)[d];
          dprobs[j] = dp;
          delta += probs[j] * dp;
        }
        for (int j = 0; j <= i; ++j) {
          const int t = i - j;
          const double dlogit = probs[j] * (dprobs[j] - delta);
          dprobs[j] = dlogit;  // kept for FIRE's row gradient below
          // logit = multiplier · scale · q·k + bias
          const double ds = dlogit * attention::multiplier<double>(mod, i, t, h) * mod.scale;
          for (int d = 0; d < head_dim; ++d) {
            mutable_row(r.dq, i)[d] += ds * row(k, j)[d];
            mutable_row(r.dk, j)[d] += ds * row(q, i)[d];
            mutable_row(r.dv, j)[d] += probs[j] * row(d_o, i)[d];
          }
          // Only a learned head scale has a gradient (the kernel writes zeros otherwise).
          if (mod.head_scale) {
            r.dhead_scale[h] +=
                attention::fixed_multiplier<double>(mod, i, t) * mod.scale * dots[j] * dlogit;
          }
          // A learned bias table's gradient by distance (the chain rule to its parameters is
          // the host's: attention/learned_bias.h).
          if (mod.bias_table && !fire.active()) r.dbias[static_cast<size_t>(h) * seq_len + t] += dlogit;
        }
        if (fire.active()) fire.add_row_gradient(h, i, dprobs, &r.dbias[static_cast<size_t>(h) * fire.len]);
      }
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Device runs.

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    const cudaError_t status_ = (call);                                                    \
    if (status_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,           \
                   cudaGetErrorString(status_));                                           \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { CHECK_CUDA(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(ptr, other.ptr);
    return *this;
  }
};

size_t element_bytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

// Uploads values (already representable in dtype) as dtype.
void upload(DeviceBuffer& target, const std::vector<double>& values, DType dtype) {
  if (dtype == DType::kFloat32) {
    std::vector<float> host(values.begin(), values.end());
    CHECK_CUDA(cudaMemcpy(target.ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
  } else {
    std::vector<uint16_t> host(values.size());
    for (size_t n = 0; n < values.size(); ++n) host[n] = float_to_bf16(static_cast<float>(values[n]));
    CHECK_CUDA(cudaMemcpy(target.ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  }
}

std::vector<double> download(const DeviceBuffer& source, size_t count, DType dtype) {
  std::vector<double> values(count);
  if (dtype == DType::kFloat32) {
    std::vector<float> host(count);
    CHECK_CUDA(cudaMemcpy(host.data(), source.ptr, count * 4, cudaMemcpyDeviceToHost));
    std::copy(host.begin(), host.end(), values.begin());
  } else {
    std::vector<uint16_t> host(count);
    CHECK_CUDA(cudaMemcpy(host.data(), source.ptr, count * 2, cudaMemcpyDeviceToHost));
    for (size_t n = 0; n < count; ++n) values[n] = bf16_to_float(host[n]);
  }
  return values;
}

// `mod` holds DEVICE pointers for head_scale / alibi_slope / bias_table here. The backward pass gets the
// kernel's own o, as autograd would give it.
Result run_kernels(const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, const std::vector<double>& d_o,
                   const ScoreMod& mod, DType dtype, int batch, int heads, int seq_len, int head_dim) {
  const size_t elems = q.size();
  const size_t rows = static_cast<size_t>(batch) * heads * seq_len;
  const size_t bytes = elems * element_bytes(dtype);
  DeviceBuffer q_dev(bytes), k_dev(bytes), v_dev(bytes), o_dev(bytes), d_o_dev(bytes);
  DeviceBuffer dq_dev(bytes), dk_dev(bytes), dv_dev(bytes);
  DeviceBuffer lse_dev(rows * 4), fixed_logit_mean_dev(rows * 4), dhead_scale_dev(heads * 4);
  // (H, T), or (H, G + 2) for a FIRE table
  const size_t dbias_count = static_cast<size_t>(heads) * (has_query_bias(mod) ? mod.bias_table_len : seq_len);
  DeviceBuffer dbias_dev(dbias_count * 4);
  upload(q_dev, q, dtype);
  upload(k_dev, k, dtype);
  upload(v_dev, v, dtype);
  upload(d_o_dev, d_o, dtype);

  FusedArgs args;
  args.batch = batch;
  args.heads = heads;
  args.seq_len = seq_len;
  args.head_dim = head_dim;
  args.dtype = dtype;
  args.mod = mod;
  args.q = q_dev.ptr;
  args.k = k_dev.ptr;
  args.v = v_dev.ptr;
  args.o = o_dev.ptr;
  args.lse = static_cast<float*>(lse_dev.ptr);
  args.fixed_logit_mean = static_cast<float*>(fixed_logit_mean_dev.ptr);
  args.d_o = d_o_dev.ptr;
  args.dq = dq_dev.ptr;
  args.dk = dk_dev.ptr;
  args.dv = dv_dev.ptr;
  args.dhead_scale = static_cast<float*>(dhead_scale_dev.ptr);
  args.dbias_table = static_cast<float*>(dbias_dev.ptr);
  DeviceBuffer workspace(attention::cuda::fused_attention_backward_workspace_bytes(args));
  args.workspace = workspace.ptr;

  CHECK_CUDA(attention::cuda::fused_attention_forward(args, nullptr));
  CHECK_CUDA(attention::cuda::fused_attention_backward(args, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());

  Result r;
  r.o = download(o_dev, elems, dtype);
  r.dq = download(dq_dev, elems, dtype);
  r.dk = download(dk_dev, elems, dtype);
  r.dv = download(dv_dev, elems, dtype);
  r.lse = download(lse_dev, rows, DType::kFloat32);
  r.dhead_scale = download(dhead_scale_dev, heads, DType::kFloat32);
  r.dbias = download(dbias_dev, dbias_count, DType::kFloat32);
  return r;
}

using attention::cuda::relative_error;  // tests/cuda/relative_error.h

// ---------------------------------------------------------------------------------------------
// Cases.

struct ModCase {
  std::string name;
  ScoreMod mod;  // pointers unset: the case fills them
  bool head_scale = false;
  bool alibi = false;
  // A learned distance bias (KERPLE-log, T5): the row's table b_h(t) at its initial values.
  attention::Method learned_bias;
  bool bias_table = false;
  bool fire = false;  // a FIRE table (mod.table_index kFire): random_fire_table's
};

// The method as a run resolves it (attention/method.h: the registry rows), L = 16 (read by logn
// and infoscale). The kernels see q and k already rotated, so a preset's positional encoding
// matters here only through ALiBi's slopes.
attention::Method resolve(const std::string& preset, const std::string& transform, int head_dim) {
  attention::MethodOptions o;
  o.method = preset;
  o.transform = transform;
  o.heads = kHeads;
  o.head_dim = head_dim;
  o.train_context = 16;
  return attention::resolve_method(o);
}

std::vector<ModCase> mod_cases(int head_dim, int seq_len) {
  using attention::score_mod;
  const auto mod = [&](const std::string& preset, const std::string& transform = "") {
    return score_mod(resolve(preset, transform, head_dim), seq_len);
  };
  std::vector<ModCase> cases;
  // Every registry transform (a new row is tested here with no edit), its learned per-head
  // parameters given when it has them: a head scale (logn), a bias table (kerple-log, t5-bias).
  // A row whose policy reads a FIRE table gets random_fire_table's (its own table form is the
  // host's, learned_bias.cpp), and without such a row a plain FIRE case runs.
  bool fire_row = false;
  for (const attention::TransformSpec& t : attention::transforms()) {
    ModCase c{t.name, mod("nope", t.name), t.learned_head_scale, false, resolve("nope", t.name, head_dim),
              t.learned_bias != nullptr};
    c.fire = c.mod.table_index == attention::TableIndex::kFire;
    c.bias_table = c.bias_table && !c.fire;
    fire_row = fire_row || c.fire;
    cases.push_back(c);
  }
  if (!fire_row) {
    ModCase c{"fire", mod("nope")};
    c.mod.table_index = attention::TableIndex::kFire;
    c.fire = true;
    cases.push_back(c);
  }
  cases.push_back({"alibi", mod("alibi"), false, true});
  // Everything at once: the head-scale gradient through row and distance factors, plus a bias
  // (logn's row composed onto scale-invariance with the registry's own fill).
  ModCase all{"si+logn+head_scale+alibi", mod("alibi", "scale-invariant"), true, true};
  attention::transform_spec(attention::Transform::kLogN).fill(resolve("nope", "logn", head_dim), all.mod);
  cases.push_back(all);
  return cases;
}

bool device_available() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  return status == cudaSuccess && count > 0;
}


// Kernel argument checks that need no kernel; false when one is not rejected.
bool unsupported_head_dim_is_rejected() {
  FusedArgs unsupported;
  unsupported.batch = 1;
  unsupported.heads = 1;
  unsupported.seq_len = 8;
  unsupported.head_dim = 96;
  return attention::cuda::fused_attention_forward(unsupported, nullptr) == cudaErrorInvalidValue;
}

// Which kernels bf16 runs on this device (fused_attention.cu's dispatch).
void print_dispatch() {
  cudaDeviceProp properties{};
  int device = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaGetDeviceProperties(&properties, device));
  std::printf("device: %s (sm_%d%d)\n", properties.name, properties.major, properties.minor);
  for (const int head_dim : {64, 128}) {
    FusedArgs probe;
    probe.head_dim = head_dim;
    probe.dtype = DType::kBFloat16;
    std::printf("bf16 D=%d: forward %s, backward %s\n", head_dim,
                attention::cuda::tc::usable(probe, false) ? "tensor cores" : "SIMT",
                attention::cuda::tc::usable(probe, true) ? "tensor cores" : "SIMT");
  }
}

// The per-head constants every case may read: head scales, and ALiBi's slopes from the registry
// (attention/method.h), on the host and on the device.
struct HeadConstants {
  float head_scales[kHeads] = {0.7f, 1.0f, 1.4f};
  float alibi_slopes[kHeads];
  DeviceBuffer head_scales_dev{sizeof(head_scales)}, alibi_slopes_dev{sizeof(alibi_slopes)};
  HeadConstants() {
    const std::vector<double> slopes = attention::alibi_slopes(kHeads);
    for (int h = 0; h < kHeads; ++h) alibi_slopes[h] = static_cast<float>(slopes[h]);
    CHECK_CUDA(cudaMemcpy(head_scales_dev.ptr, head_scales, sizeof(head_scales), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(alibi_slopes_dev.ptr, alibi_slopes, sizeof(alibi_slopes), cudaMemcpyHostToDevice));
  }
};

// One problem's inputs, rounded to the element type so the reference sees exactly what the
// kernel sees.
struct Problem {
  DType dtype;
  int batch, heads, seq_len, head_dim;
  std::vector<double> q, k, v, d_o;
};

// A case's score mods for the host reference and the device, with their learned table: a
// registry row's at its initial values plus noise, so that every entry differs (T5's buckets
// start at 0), (heads, seq_len); FIRE's random table, (heads, G + 2).
struct CaseMods {
  ScoreMod host, device;
  std::vector<float> bias_table;
  DeviceBuffer bias_table_dev;
};
void attach_tables(const ModCase& c, const Problem& p, const HeadConstants& k, std::mt19937& rng, CaseMods& m) {
  std::normal_distribution<double> normal(0.0, 1.0);
  m.host = m.device = c.mod;
  if (c.head_scale) {
    m.host.head_scale = k.head_scales;
    m.device.head_scale = static_cast<const float*>(k.head_scales_dev.ptr);
  }
  if (c.alibi) {
    m.host.alibi_slope = k.alibi_slopes;
    m.device.alibi_slope = static_cast<const float*>(k.alibi_slopes_dev.ptr);
  }
  int len = 0;
  if (c.fire) {
    m.bias_table = attention::cuda::test::random_fire_table(p.heads, kFireGrid, p.seq_len, rng);
    len = kFireGrid + 2;
  } else if (c.bias_table) {
    attention::Method method = c.learned_bias;
    method.heads = p.heads;
    const std::vector<double> values =
        attention::learned_bias_table_values(method, attention::initial_learned_values(method), p.seq_len);
    for (double value : values) m.bias_table.push_back(static_cast<float>(value + 0.5 * normal(rng)));
    len = p.seq_len;
  }
  if (len == 0) return;
  m.bias_table_dev = DeviceBuffer(m.bias_table.size() * sizeof(float));
  CHECK_CUDA(cudaMemcpy(m.bias_table_dev.ptr, m.bias_table.data(), m.bias_table.size() * sizeof(float),
                        cudaMemcpyHostToDevice));
  m.host.bias_table = m.bias_table.data();
  m.device.bias_table = static_cast<const float*>(m.bias_table_dev.ptr);
  m.host.bias_table_len = m.device.bias_table_len = len;
}

// One case against the float64 reference: prints its line, returns whether every output is within
// `tolerance` (max |err| / max |ref|) and counts its checks.
bool check_case(const ModCase& c, const Problem& p, const HeadConstants& constants, const std::string& id,
                double tolerance, int& checks, std::vector<std::string>* failed = nullptr) {
  std::mt19937 rng(seed_of(id + "/tables"));
  CaseMods m;
  attach_tables(c, p, constants, rng, m);
  const Result want = reference(p.q, p.k, p.v, p.d_o, m.host, p.batch, p.heads, p.seq_len, p.head_dim);
  const Result got = run_kernels(p.q, p.k, p.v, p.d_o, m.device, p.dtype, p.batch, p.heads, p.seq_len, p.head_dim);
  struct Check {
    const char* name;
    double error;
  };
  std::vector<Check> results = {
      {"o", relative_error(got.o, want.o, 1e-3)},     {"lse", relative_error(got.lse, want.lse, 1e-3)},
      {"dq", relative_error(got.dq, want.dq, 1.0)},   {"dk", relative_error(got.dk, want.dk, 1.0)},
      {"dv", relative_error(got.dv, want.dv, 1e-3)},
  };
  // Without a learned head scale the kernel must leave dhead_scale at zero; likewise
  // dbias_table without a learned table.
  results.push_back({"dhead_scale", relative_error(got.dhead_scale, want.dhead_scale, 1.0)});
  if (!c.head_scale)
    for (double value : got.dhead_scale)
      if (value != 0.0) results.back().error = INFINITY;
  if (c.fire) {  // grid, c and L apart: one measure would be |d c|'s (fire_table.h)
    const auto e = attention::cuda::test::fire_gradient_errors(got.dbias, want.dbias, kFireGrid);
    results.insert(results.end(), {{"dgrid", e.grid}, {"dc", e.c}, {"dL", e.threshold}});
  } else {
    results.push_back({"dbias", relative_error(got.dbias, want.dbias, 1.0)});
    if (!c.bias_table)
      for (double value : got.dbias)
        if (value != 0.0) results.back().error = INFINITY;
  }
  bool ok = true;
  std::string line;
  for (const Check& check : results) {
    ++checks;
    const bool pass = check.error <= tolerance;
    ok = ok && pass;
    if (!pass && failed) failed->push_back(check.name);
    char text[64];
    std::snprintf(text, sizeof(text), " %s=%.2e%s", check.name, check.error, pass ? "" : "!");
    line += text;
  }
  std::printf("%-4s %-34s%s\n", ok ? "ok" : "FAIL", id.c_str(), line.c_str());
  std::fflush(stdout);  // a kernel fault after this line still leaves it in the log
  return ok;
}

// A case's id: dtype/D/T/score mod.
std::string case_id(DType dtype, int head_dim, int seq_len, const std::string& name) {
  return std::string(dtype == DType::kBFloat16 ? "bf16" : "fp32") + "/" + std::to_string(head_dim) + "/" +
         std::to_string(seq_len) + "/" + name;
}

// Tolerances, as max |err| / max |ref| against float64 on the same (already rounded) inputs.
// fp32: fp32 accumulation over ≤ 200 terms and fp32 exp/log, ~1e-6; 1e-4 leaves room.
// bf16: bf16 has an 8-bit significand, unit roundoff u = 2^-9 ≈ 2e-3. Beyond the inputs
// (exact here), the kernels round o, dq, dk, dv to bf16 on output (≤ u each) and, on the
// tensor-core path, P to bf16 for P·V and dV += Pᵀ·dO and dS to bf16 for dK and dQ, as
// FlashAttention-2 does (≤ u per element, mostly averaging out over a row). Those are a few u
// together, ≤ ~1e-2 in the worst case where they add up (the host emulation of the
// tensor-core kernels, mma_layout_test.cpp, sees ≤ 8.6e-3); lse, dhead_scale and dbias are
// accumulated in fp32. 2e-2 (10 u) holds that with margin, while a wrong layout, tile or mask
// gives errors of order one. The same bound covers the SIMT path (fp32 P and dS).
double tolerance_of(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 1e-4; }

// q, k, v, dO of one (dtype, D, T), seeded from those alone: a case run alone (--case) sees the
// inputs it sees in the full run. T = 4096: B = H = 1 (the reference is O(T²·D) in float64).
Problem make_problem(DType dtype, int head_dim, int seq_len) {
  const bool bf16 = dtype == DType::kBFloat16, long_case = seq_len == kLongSeqLen;
  Problem p{dtype, long_case ? 1 : kBatch, long_case ? 1 : kHeads, seq_len, head_dim, {}, {}, {}, {}};
  std::mt19937 rng(seed_of(case_id(dtype, head_dim, seq_len, "inputs")));
  std::normal_distribution<double> normal(0.0, 1.0);
  const size_t elems = static_cast<size_t>(p.batch) * p.heads * seq_len * head_dim;
  for (std::vector<double>* x : {&p.q, &p.k, &p.v, &p.d_o}) {
    x->resize(elems);
    for (double& value : *x) {
      const float f = static_cast<float>(normal(rng));
      value = bf16 ? bf16_to_float(float_to_bf16(f)) : f;
    }
  }
  return p;
}

// What a failing first-contact case points at, from its T and the outputs that failed.
const char* tc_suspect(int seq_len, const std::vector<std::string>& failed) {
  const auto has = [&](const char* name) { return std::find(failed.begin(), failed.end(), name) != failed.end(); };
  if (seq_len == 64) {
    if (has("lse")) return "S = Q·Kᵀ in one full tile: mma.sync's operand order, or ldmatrix of Q/K";
    if (has("o")) return "O += P·V (lse is right): ldmatrix.trans of V, or P re-packed into A fragments";
    return "the backward's MMAs (dV += Pᵀ·dO, dK += dSᵀ·Q, dQ = dS·K), its ldmatrix.trans or dSᵀ through shared memory";
  }
  if (seq_len == 40) return "a ragged single tile (the full tile passes?): cp.async zero-fill of rows ≥ T, or the mask";
  if (seq_len == 128) return "two full tiles: the cp.async double buffer (commit/wait_group, barriers) or an off-diagonal tile";
  return "a ragged tile after a full one: zero-fill of the second buffer, or the last tile's range";
}

// The first bf16 cases, plain attention (score mod "none"), each adding one thing the host
// emulation of the tensor-core kernels could not check: T = 64 one full tile (the inline PTX
// operands, ldmatrix, .trans), T = 40 one ragged tile (cp.async zero-fill), T = 128 two full tiles
// (the cp.async pipeline), T = 100 a ragged tile after a full one; D = 64 and 128. Returns the
// failing cases.
int tc_first_contact(const HeadConstants& constants, const std::string& filter, int& checks, int& matched) {
  int failures = 0;
  for (const int head_dim : {64, 128})
    for (const int seq_len : {64, 40, 128, 100}) {
      for (const ModCase& c : mod_cases(head_dim, seq_len)) {
        if (c.name != "none") continue;
        const std::string id = case_id(DType::kBFloat16, head_dim, seq_len, "none");
        if (id.find(filter) == std::string::npos) continue;
        ++matched;
        std::vector<std::string> failed;
        const Problem p = make_problem(DType::kBFloat16, head_dim, seq_len);
        if (check_case(c, p, constants, id, tolerance_of(DType::kBFloat16), checks, &failed)) continue;
        ++failures;
        std::printf("     suspect: %s\n", tc_suspect(seq_len, failed));
      }
    }
  return failures;
}

// Every case of one element type whose id contains `filter`; returns the failing cases.
int check_dtype(DType dtype, const HeadConstants& constants, const std::string& filter, int& checks, int& matched) {
  int failures = 0;
  for (const int head_dim : {64, 128}) {
    std::vector<int> seq_lens = {1, 37, 200};
    if (dtype == DType::kBFloat16) seq_lens.push_back(kLongSeqLen);
    for (const int seq_len : seq_lens) {
      Problem p;
      bool made = false;
      for (const ModCase& c : mod_cases(head_dim, seq_len)) {
        // At T = 4096: no transform, the learned bias (KERPLE), FIRE (many tiles of its ψ tables)
        // and everything at once, which between them reach every term of the logit and every
        // gradient output.
        if (seq_len == kLongSeqLen && !(c.name == "none" || c.name == "kerple-log" || c.fire || (c.head_scale && c.alibi)))
          continue;
        const std::string id = case_id(dtype, head_dim, seq_len, c.name);
        if (id.find(filter) == std::string::npos) continue;
        ++matched;
        if (!made) {
          p = make_problem(dtype, head_dim, seq_len);
          made = true;
        }
        if (!check_case(c, p, constants, id, tolerance_of(dtype), checks)) ++failures;
      }
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter;  // --case SUBSTRING of a case id; empty: every case
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--case" && a + 1 < argc) filter = argv[++a];
    else if (arg.rfind("--case=", 0) == 0) filter = arg.substr(7);
    else {
      std::fprintf(stderr, "usage: %s [--case ID-SUBSTRING]   (ids: dtype/D/T/score-mod, e.g. bf16/64/37/alibi)\n", argv[0]);
      return 2;
    }
  }
  if (!device_available()) {
    std::printf("SKIPPED: no CUDA device\n");
    return kSkipped;
  }
  if (!unsupported_head_dim_is_rejected()) {
    std::printf("FAIL: head_dim 96 was not rejected\n");
    return 1;
  }
  print_dispatch();
  const HeadConstants constants;
  int failures = 0, checks = 0, matched = 0;
  failures += tc_first_contact(constants, filter, checks, matched);
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16})
    failures += check_dtype(dtype, constants, filter, checks, matched);
  if (matched == 0) {
    std::printf("no case id contains '%s' (ids: dtype/D/T/score-mod, e.g. bf16/64/37/alibi)\n", filter.c_str());
    return 2;
  }
  std::printf("%s: %d case(s), %d check(s), %d failing case(s); tolerances fp32 1e-4, bf16 2e-2 (max |err| / max |ref|)\n",
              failures ? "FAILED" : "PASSED", matched, checks, failures);
  return failures ? 1 : 0;
}
