// Where one training step's time goes, by part, against each part's own peak (#60 item 1). Not a
// test: it prints a Markdown table.
//
//   bench_step_breakdown [--config FILE] [--set key=value]... [--threads N] [--steps N]
//                        [--warmup N] [--profiled N] [--label TEXT]
//
// The step is `harness train`'s (harness/train/trainer.cpp: zero_grad, the micro-batches' forward
// and backward with each loss divided by their count, the gradient norm and clip, the optimiser
// step) on the run config's model and optimiser (default bench/peer/bench.yaml); batches are
// uniform random tokens (no corpus: "data" here is making that batch, not the harness's reader).
//
// 1. The peaks, measured in this process at this thread count: sgemm (a 1024³ float32 product,
//    best of 5) and a pointwise pass (a += b over 1 Mi float32, bytes = 3 × 4 MiB, best of 20).
// 2. The step itself: median wall time of --steps steps after --warmup, no profiler.
// 3. --profiled more steps under the Kineto profiler (CPU, input shapes). Every event of the
//    step's thread is charged its self time (its duration less the events nested in it) to one
//    part, by its name and the scopes around it (RECORD_USER_SCOPE / RECORD_FUNCTION names set in
//    models/: model.attention, model.loss, model.rms_norm, model.relu_squared, optim.muon.*,
//    optim.adam, optim.clip_grad_norm; the backward's autograd nodes by their names):
//      GEMM fwd / bwd     aten::mm, addmm, bmm of the blocks (q, k, v, o, fc, proj), outside and
//                         inside the backward
//      GEMM head          the head's GEMMs inside the chunked loss (logits, d hidden, d weight)
//      attention          the fused kernel's forward (with rotary: no finer scope there) and
//                         backward node; "attention wrapper": ATen ops under them
//      Muon NS            the Newton–Schulz phase, everything in it (the normalisation, addmm's
//                         copy of its input for β); at 2 threads its worker thread's GEMMs are
//                         not seen, the phase's wall time is. Muon rest: momentum, update
//      Adam, clip, loss (softmax/NLL ops of the chunked loss), norms + pointwise (the fused
//      RMSNorm / ReLU² and the other element-wise ATen ops, forward and backward)
//      dispatch/alloc     view, empty, to-wrappers, autograd nodes' own time, AccumulateGrad
//      rest               the step's time outside every recorded op (C++ between ops)
//    The profiled step is longer than the unprofiled one by the profiler's own cost (printed);
//    the shares are of the profiled step.
// 4. The floor: the step if every part ran at its own measured peak — GEMM groups and Muon's
//    Newton–Schulz at their FLOPs (from the recorded shapes; Newton–Schulz from the matrices'
//    shapes) over the sgemm rate, attention at 3.5 · 2·B·H·T²·D per layer (causal, fwd+bwd) over
//    the sgemm rate, the memory-bound parts at the bytes their ops' recorded shapes read and write
//    over the pointwise rate (ops without recorded shapes count at their measured time), data at
//    its measured time, dispatch and rest at zero. The step's ratio to it: unprofiled step / floor.
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace {

using bench::Clock;
using bench::median;
using bench::ms_since;

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown CPU";
}

// sgemm rate (FLOP/s) at this thread count: best of 5 products of 1024² float32 matrices.
double sgemm_rate() {
  const int64_t n = 1024;
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  torch::mm_out(c, a, b);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    torch::mm_out(c, a, b);
    best = std::min(best, ms_since(t0));
  }
  return 2.0 * double(n) * double(n) * double(n) / (best / 1e3);
}

// A pointwise pass's rate (bytes/s): a += b over 1 Mi float32 (two reads, one write), best of 20.
double pointwise_rate() {
  const int64_t n = int64_t(1) << 20;
  auto a = torch::randn({n}), b = torch::randn({n});
  a.add_(b);
  double best = 1e30;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    a.add_(b);
    best = std::min(best, ms_since(t0));
  }
  return 3.0 * 4.0 * double(n) / (best / 1e3);
}

enum Part {
  kGemmFwd, kGemmBwd, kGemmHead, kAttention, kAttentionWrapper, kMuonNS, kMuonRest, kAdam, kClip,
  kLoss, kPointwise, kData, kDispatch, kRest, kParts
};
const std::array<const char*, kParts> kPartNames = {
    "GEMM forward (blocks)", "GEMM backward (blocks)", "GEMM head (in the loss, fwd+bwd)",
    "attention kernel (fused fwd+bwd; fwd incl. rotary)", "attention wrapper (ATen ops inside)",
    "Muon Newton–Schulz", "Muon momentum + update", "Adam", "gradient norm + clip",
    "loss (softmax, NLL)", "norms + pointwise (fwd+bwd)", "data (random batch)",
    "dispatch, alloc, autograd nodes", "rest (between recorded ops)"};

bool is_gemm(const std::string& n) {
  return n == "aten::mm" || n == "aten::addmm" || n == "aten::bmm" || n == "aten::baddbmm" ||
         n == "aten::addmm_" || n == "aten::_addmm_activation";
}

// ATen ops that move no data of their own (views, allocation, wrappers whose work is nested).
bool is_dispatch(const std::string& n) {
  static const std::set<std::string> ops = {
      "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::view",
      "aten::t", "aten::transpose", "aten::reshape", "aten::_reshape_alias", "aten::slice",
      "aten::select", "aten::detach", "aten::detach_", "aten::unsqueeze", "aten::squeeze",
      "aten::expand", "aten::alias", "aten::narrow", "aten::linear", "aten::matmul", "aten::to",
      "aten::_unsafe_view", "aten::resolve_conj", "aten::resolve_neg", "aten::permute",
      "aten::lift_fresh", "aten::_to_copy", "aten::numpy_T", "aten::contiguous", "aten::result_type",
      "aten::set_", "aten::resize_", "aten::flatten", "aten::item", "aten::_local_scalar_dense",
      "aten::split", "aten::chunk", "aten::unbind", "aten::stack", "aten::cat"};
  return ops.count(n) > 0;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

// FLOPs of a GEMM event from its recorded input shapes (0 if they are missing).
double gemm_flops(const std::string& n, const std::vector<std::vector<int64_t>>& s) {
  auto mk = [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    if (a.size() == 2 && b.size() == 2) return 2.0 * double(a[0]) * double(a[1]) * double(b[1]);
    if (a.size() == 3 && b.size() == 3) return 2.0 * double(a[0]) * double(a[1]) * double(a[2]) * double(b[2]);
    return 0.0;
  };
  if ((n == "aten::mm" || n == "aten::bmm") && s.size() >= 2) return mk(s[0], s[1]);
  if (s.size() >= 3) return mk(s[1], s[2]);  // addmm, baddbmm: (bias, a, b)
  return 0.0;
}

// Bytes an element-wise or row-wise op reads and writes, from its input shapes: each tensor input
// once, and an output the size of the largest input (4 bytes an element); 0 if no shapes.
double op_bytes(const std::vector<std::vector<int64_t>>& s) {
  double in = 0, largest = 0;
  for (const auto& shape : s) {
    if (shape.empty()) continue;
    in += double(numel(shape));
    largest = std::max(largest, double(numel(shape)));
  }
  return 4.0 * (in + largest);
}

struct Tally {
  std::array<double, kParts> ms{};          // self time summed over the profiled steps
  std::array<double, kParts> flops{};       // GEMM parts
  std::array<double, kParts> bytes{};       // memory-bound parts, ops with shapes
  std::array<double, kParts> unshaped_ms{};  // memory-bound parts, ops without shapes
  double step_ms = 0;                        // the profiled steps' wall time, summed
  std::array<std::map<std::string, std::pair<double, int64_t>>, kParts> ops;  // name → (ms, calls)
};

Tally tally(const torch::autograd::profiler::ProfilerResult& result) {
  struct Ev {
    uint64_t thread, start, end;
    std::string name;
    std::vector<std::vector<int64_t>> shapes;
  };
  std::vector<Ev> evs;
  uint64_t step_thread = 0;
  for (const auto& e : result.events()) {
    Ev ev{e.startThreadId(), e.startNs(), e.startNs() + e.durationNs(), e.name(), {}};
    if (e.hasShapes())
      for (const auto& s : e.shapes()) ev.shapes.push_back(s);
    if (ev.name == "step") step_thread = ev.thread;
    evs.push_back(std::move(ev));
  }
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.thread != b.thread ? a.thread < b.thread : (a.start != b.start ? a.start < b.start : a.end > b.end);
  });
  Tally t;
  std::vector<double> child_ns(evs.size(), 0.0);
  std::vector<size_t> stack_idx;
  // First pass: nesting, self time; each event classified by itself and its enclosing events.
  std::vector<int> part(evs.size(), -1);
  std::vector<double> self_ns(evs.size(), 0.0);
  for (size_t i = 0; i < evs.size(); ++i) {
    const Ev& e = evs[i];
    if (e.thread != step_thread) continue;
    while (!stack_idx.empty() && evs[stack_idx.back()].end <= e.start) stack_idx.pop_back();
    if (!stack_idx.empty()) child_ns[stack_idx.back()] += double(e.end - e.start);
    bool in_step = false, data = false, ns = false, muon = false, adam = false, clip = false,
         loss = false, attn = false, bwd = false;
    for (size_t j : stack_idx) {
      const auto& n = evs[j].name;
      in_step |= n == "step";
      data |= n == "step.data";
      ns |= n == "optim.muon.newton_schulz";
      muon |= n.rfind("optim.muon", 0) == 0;
      adam |= n == "optim.adam";
      clip |= n == "optim.clip_grad_norm";
      loss |= n == "model.loss" || contains(n, "ChunkedCrossEntropy");
      attn |= n == "model.attention" || contains(n, "FusedAttention") || contains(n, "Rotary");
      bwd |= n.rfind("autograd::engine::evaluate_function", 0) == 0;
    }
    const auto& n = e.name;
    if (n == "step") t.step_ms += double(e.end - e.start) / 1e6;
    const bool self_attn = n == "model.attention" || contains(n, "FusedAttention");
    const bool aten = n.rfind("aten::", 0) == 0;
    int p;
    if (n == "step") p = kRest;
    else if (!in_step) p = -1;
    else if (data || n == "step.data") p = kData;
    else if (ns || n == "optim.muon.newton_schulz") p = kMuonNS;  // addmm's copy of its input too
    else if (muon || n.rfind("optim.muon", 0) == 0) p = kMuonRest;
    else if (adam || n == "optim.adam") p = kAdam;
    else if (clip || n == "optim.clip_grad_norm") p = kClip;
    else if (loss || n == "model.loss" || contains(n, "ChunkedCrossEntropy"))
      p = is_gemm(n) ? kGemmHead : is_dispatch(n) ? kDispatch : kLoss;
    else if (self_attn || contains(n, "Rotary")) p = self_attn ? kAttention : kAttentionWrapper;
    else if (attn) p = is_dispatch(n) ? kDispatch : kAttentionWrapper;
    else if (is_gemm(n)) p = bwd ? kGemmBwd : kGemmFwd;
    else if (n == "model.rms_norm" || n == "model.relu_squared" || contains(n, "RMSNorm") ||
             contains(n, "ReluSquared"))
      p = kPointwise;
    else if (is_dispatch(n) || !aten) p = kDispatch;  // autograd nodes' own time, AccumulateGrad, scopes
    else p = kPointwise;
    part[i] = p;
    stack_idx.push_back(i);
  }
  for (size_t i = 0; i < evs.size(); ++i) {
    if (part[i] < 0) continue;
    const double self = std::max(0.0, double(evs[i].end - evs[i].start) - child_ns[i]) / 1e6;
    const int p = part[i];
    t.ms[p] += self;
    const auto& n = evs[i].name;
    auto& op = t.ops[p][n];
    op.first += self;
    ++op.second;
    if (p == kGemmFwd || p == kGemmBwd || p == kGemmHead) {
      if (is_gemm(n)) t.flops[p] += gemm_flops(n, evs[i].shapes);
    } else if (p == kLoss || p == kPointwise || p == kAdam || p == kClip || p == kMuonRest ||
               p == kAttentionWrapper) {
      const double b = op_bytes(evs[i].shapes);
      if (b > 0 && !is_dispatch(n)) t.bytes[p] += b;
      else t.unshaped_ms[p] += self;
    }
  }
  return t;
}

// Newton–Schulz FLOPs of one optimiser step: per matrix (r ≤ c) and iteration X·Xᵀ (2r²c), A·A
// (2r³), B·X (2r²c) — models/muon.cpp.
double newton_schulz_flops(const models::Optimizers& optim) {
  if (optim.options().name != "muon") return 0.0;
  double f = 0;
  for (const auto& p : optim.group(models::ParamGroup::kHidden)) {
    const double r = double(std::min(p.size(0), p.size(1))), c = double(std::max(p.size(0), p.size(1)));
    f += 5.0 * (4.0 * r * r * c + 2.0 * r * r * r);
  }
  return f;
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string config_path = "bench/peer/bench.yaml", label;
  std::vector<std::string> overrides;
  int steps = 20, warmup = 5, profiled = 10, threads = 1;
  po::options_description opts("bench_step_breakdown options");
  opts.add_options()("help,h", "this help")(
      "config", po::value(&config_path), "run config (default bench/peer/bench.yaml)")(
      "set", po::value(&overrides)->composing(), "override a key (repeatable)")(
      "steps", po::value(&steps), "timed steps without the profiler (default 20)")(
      "warmup", po::value(&warmup), "untimed steps first (default 5)")(
      "profiled", po::value(&profiled), "steps under the profiler (default 10)")(
      "threads", po::value(&threads), "torch threads (default 1)")(
      "label", po::value(&label), "a name for the config in the table's title");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (bench::help_requested(opts, vm)) return 0;
  if (steps < 1 || warmup < 0 || profiled < 1 || threads < 1)
    throw std::invalid_argument("bad --steps/--warmup/--profiled/--threads");

  auto configured = bench::configured_model(config_path, overrides, threads);
  const auto& c = configured.loaded.config;
  if (c.run.device != "cpu") throw std::invalid_argument("bench_step_breakdown measures CPU runs (run.device: cpu)");
  auto& model = configured.model;
  models::Optimizers optim(model, c.optim);
  const int64_t B = c.train.batch_size, L = c.train.context;
  const int64_t micro = c.train.micro_batch_size > 0 ? c.train.micro_batch_size : B / c.train.grad_accum;
  const int64_t micro_batches = B / micro;
  model->train();

  const double sgemm = sgemm_rate(), bandwidth = pointwise_rate();

  const auto step = [&](int i) {
    RECORD_USER_SCOPE("step");
    optim.set_lr_factor(models::lr_factor(c.schedule, i, warmup + steps + profiled));
    optim.zero_grad();
    torch::Tensor batch;
    {
      RECORD_USER_SCOPE("step.data");
      batch = torch::randint(0, configured.vocab, {B, L + 1}, torch::kLong);
    }
    auto loss_total = torch::zeros({}, torch::kDouble);
    for (int64_t start = 0; start < B; start += micro) {
      const auto rows = batch.slice(0, start, start + micro);
      auto loss = model->loss(rows.slice(1, 0, L), rows.slice(1, 1, L + 1)) / double(micro_batches);
      loss.backward();
      loss_total += loss.detach().to(torch::kDouble);
    }
    (void)models::clip_grad_norm(model, c.train.grad_clip);
    optim.step();
    (void)loss_total.item<double>();
  };
  int i = 0;
  for (; i < warmup; ++i) step(i);
  std::vector<double> times;
  for (int k = 0; k < steps; ++k, ++i) {
    const auto t0 = Clock::now();
    step(i);
    times.push_back(ms_since(t0));
  }
  const double step_ms = median(times);

  namespace prof = torch::autograd::profiler;
  const std::set<torch::profiler::impl::ActivityType> cpu{torch::profiler::impl::ActivityType::CPU};
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO,
                                                      /*report_input_shapes=*/true);
  prof::prepareProfiler(config, cpu);
  prof::enableProfiler(config, cpu);
  for (int k = 0; k < profiled; ++k, ++i) step(i);
  const Tally t = tally(*prof::disableProfiler());

  const double n = double(profiled);
  double recorded = 0;
  for (int p = 0; p < kParts; ++p)
    if (p != kRest) recorded += t.ms[p];
  std::array<double, kParts> ms{};
  for (int p = 0; p < kParts; ++p) ms[p] = t.ms[p] / n;
  ms[kRest] = std::max(0.0, (t.step_ms - recorded) / n);
  const double prof_step = t.step_ms / n;

  // Attention FLOPs, causal, forward + backward: 3.5 · 2·B·H·T²·D per layer.
  const double attention_flops = 3.5 * 2.0 * double(B) * double(c.model.heads) * double(L) * double(L) *
                                 double(c.model.head_dim) * double(c.model.layers);
  std::array<double, kParts> flops{};
  for (int p : {kGemmFwd, kGemmBwd, kGemmHead}) flops[p] = t.flops[p] / n;
  flops[kAttention] = attention_flops;
  flops[kMuonNS] = newton_schulz_flops(optim);
  std::array<double, kParts> floor{};
  double floor_total = 0;
  for (int p = 0; p < kParts; ++p) {
    if (flops[p] > 0) floor[p] = flops[p] / sgemm * 1e3;
    else if (p == kData) floor[p] = ms[p];
    else if (p == kDispatch || p == kRest) floor[p] = 0;
    else floor[p] = t.bytes[p] / n / bandwidth * 1e3 + t.unshaped_ms[p] / n;
    floor_total += floor[p];
  }

  const std::string title = label.empty() ? config_path : label;
  fmt::print("### {} — {} thread{}\n\n", title, threads, threads == 1 ? "" : "s");
  fmt::print("{}; {} layers, d_model {}, {} heads × {}, method {}, B = {} (micro-batches of {}), L = {}, "
             "optimiser {}; sgemm {:.0f} GFLOP/s (1024³), pointwise {:.1f} GB/s (a += b, 4 MiB), "
             "measured in this process.\n\n",
             cpu_name(), c.model.layers, c.model.d_model, c.model.heads, c.model.head_dim, c.attention.method, B,
             micro, L, c.optim.name, sgemm / 1e9, bandwidth / 1e9);
  fmt::print("| part | ms / step | share | GFLOP/s | % of sgemm | floor ms |\n|---|---|---|---|---|---|\n");
  for (int p = 0; p < kParts; ++p) {
    std::string rate = "–", pct = "–";
    if (flops[p] > 0 && ms[p] > 0) {
      const double r = flops[p] / (ms[p] / 1e3);
      rate = fmt::format("{:.1f}", r / 1e9);
      pct = fmt::format("{:.0f}%", 100.0 * r / sgemm);
    } else if (t.bytes[p] > 0 && ms[p] > 0) {
      rate = fmt::format("{:.1f} GB/s", t.bytes[p] / n / ((ms[p] - t.unshaped_ms[p] / n) / 1e3) / 1e9);
    }
    fmt::print("| {} | {:.3f} | {:.1f}% | {} | {} | {:.3f} |\n", kPartNames[p], ms[p], 100.0 * ms[p] / prof_step,
               rate, pct, floor[p]);
  }
  fmt::print("| **profiled step** | {:.3f} | 100% | | | **{:.3f}** |\n\n", prof_step, floor_total);
  // What each part is made of: its events by self time (the largest four).
  fmt::print("Largest events of each part (ms / step, calls / step):\n\n");
  for (int p = 0; p < kParts; ++p) {
    if (t.ops[p].empty()) continue;
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> v(t.ops[p].begin(), t.ops[p].end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::string line;
    for (size_t k = 0; k < std::min<size_t>(4, v.size()); ++k) {
      std::string name = v[k].first;
      if (name.size() > 70) name = name.substr(0, 67) + "...";
      line += fmt::format("{}`{}` {:.2f} ({:.0f})", k ? ", " : "", name, v[k].second.first / n,
                          double(v[k].second.second) / n);
    }
    fmt::print("- {}: {}\n", kPartNames[p], line);
  }
  fmt::print("\n");
  const double tokens = double(B * L);
  fmt::print("Unprofiled step: **{:.3f} ms** (median of {}; {:.0f} tokens/s); profiled {:.3f} ms "
             "(the profiler adds {:.1f}%). Floor {:.3f} ms: **the step is {:.2f}× its floor**.\n\n",
             step_ms, steps, tokens / step_ms * 1e3, prof_step, 100.0 * (prof_step / step_ms - 1.0), floor_total,
             step_ms / floor_total);
  fmt::print("BREAKDOWN label=\"{}\" threads={} step_ms={:.3f} profiled_ms={:.3f} floor_ms={:.3f} "
             "ratio_to_floor={:.3f} sgemm_gflops={:.1f}\n\n",
             title, threads, step_ms, prof_step, floor_total, step_ms / floor_total, sgemm / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_step_breakdown", argc, argv, run); }
