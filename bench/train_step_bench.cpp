// Where one training step of `harness train` spends its time: the step split into its phases
// (forward + backward, gradient norm, optimiser step) and, with --profile, the LibTorch operators
// ranked by self time (kineto). The end-to-end comparison with the Python peer is
// bench/train_vs_peer.sh; this one says what to optimise. Not a test.
//
//   bench_train_step [--config FILE] [--set key=value]... [--steps N] [--warmup N]
//                    [--threads N] [--profile] [--top K]
//
// The model, optimiser and schedule come from the run config (default bench/peer/bench.yaml,
// the peer benchmark's); batches are uniform random tokens, so no corpus is needed. Times are
// wall-clock medians over the steps after the warm-up.
//
// On run.device: cuda (a CUDA LibTorch) it also prints what a GPU run is judged by: tokens/s,
// MFU — model FLOPs per second over the bf16 (or, for fp32 runs, fp32) matmul rate measured in
// this same process on an 8192³ product — with the model FLOPs per token taken as
// 6·(matmul parameters) + 6·layers·heads·head_dim·L (causal attention, forward and backward,
// counted once: FlashAttention's convention), the allocator's peak memory, and the share of the
// step spent in attention (the attention module alone, forward + backward, on the step's shapes,
// times the layers).
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "harness/config/engine_options.h"
#include "harness/train/device_memory.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace {

using bench::Clock;
using bench::median;
using bench::ms_since;

// Event times in µs. LibTorch 1.13's KinetoEvent has startUs()/durationUs(); later versions
// have startNs()/durationNs() (and may drop the µs ones): take the ns form when it exists.
template <class E>
auto start_us(const E& e, int) -> decltype(uint64_t(e.startNs())) {
  return e.startNs() / 1000;
}
template <class E>
uint64_t start_us(const E& e, long) {
  return e.startUs();
}
template <class E>
auto duration_us(const E& e, int) -> decltype(uint64_t(e.durationNs())) {
  return e.durationNs() / 1000;
}
template <class E>
uint64_t duration_us(const E& e, long) {
  return e.durationUs();
}

// Self time per operator name: each event's duration minus that of the events nested in it on
// the same thread.
void print_operator_table(const torch::autograd::profiler::ProfilerResult& result, int steps,
                          int top) {
  struct Ev {
    uint64_t thread, start, end;
    std::string name;
  };
  std::vector<Ev> evs;
  for (const auto& e : result.events())
    evs.push_back({e.startThreadId(), start_us(e, 0), start_us(e, 0) + duration_us(e, 0), e.name()});
  std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.thread != b.thread ? a.thread < b.thread
                                : (a.start != b.start ? a.start < b.start : a.end > b.end);
  });
  struct Row {
    double self_us = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Row> rows;
  std::vector<const Ev*> stack;
  double total = 0;
  for (const auto& e : evs) {
    while (!stack.empty() && (stack.back()->thread != e.thread || stack.back()->end <= e.start))
      stack.pop_back();
    auto& r = rows[e.name];
    r.self_us += double(e.end - e.start);
    ++r.calls;
    if (!stack.empty()) rows[stack.back()->name].self_us -= double(e.end - e.start);
    else total += double(e.end - e.start);
    stack.push_back(&e);
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  fmt::print("\noperators by self time ({} profiled steps; profiler overhead included)\n", steps);
  fmt::print("{:<48} {:>12} {:>7} {:>12}\n", "operator", "ms / step", "share", "calls / step");
  for (int i = 0; i < std::min<int>(top, int(sorted.size())); ++i) {
    const auto& [name, r] = sorted[i];
    fmt::print("{:<48} {:>12.3f} {:>6.1f}% {:>12.1f}\n", name.substr(0, 48),
               r.self_us / 1e3 / steps, 100.0 * r.self_us / total, double(r.calls) / steps);
  }
  fmt::print("{:<48} {:>12.3f}\n", "all top-level operators", total / 1e3 / steps);
}

// Seconds per call of f, after one untimed call; the device is waited for around each.
template <class F>
double seconds_per_call(F&& f, int calls, const torch::Device& device) {
  const auto sync = [&] { (void)torch::zeros({1}, torch::TensorOptions().device(device)).item<float>(); };
  f();
  sync();
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) f();
  sync();
  return std::chrono::duration<double>(Clock::now() - t0).count() / calls;
}

void print_device_figures(models::GPT& model, const harness::config::RunConfig& c, const torch::Device& device,
                          double step_ms, int64_t micro) {
  const int64_t B = c.train.batch_size, L = c.train.context;
  const auto dtype = c.train.precision == "bf16" ? torch::kBFloat16 : torch::kFloat32;
  // The matmul rate of this device in the run's dtype, measured here.
  const int64_t n = 8192;
  const auto a = torch::randn({n, n}, torch::TensorOptions().device(device).dtype(dtype));
  const auto b = torch::randn({n, n}, torch::TensorOptions().device(device).dtype(dtype));
  const double matmul_s = seconds_per_call([&] { (void)torch::matmul(a, b); }, 10, device);
  const double peak_flops = 2.0 * double(n) * double(n) * double(n) / matmul_s;
  // Model FLOPs per token (see the header).
  int64_t matmul_params = 0;
  for (const auto& p : model->named_parameters())
    if (p.value().dim() == 2 && p.key() != "embed.weight") matmul_params += p.value().numel();
  const double attention_flops = 6.0 * double(c.model.layers * c.model.heads * c.model.head_dim * L);
  const double flops_per_token = 6.0 * double(matmul_params) + attention_flops;
  const double tokens_per_s = double(B * L) / (step_ms / 1e3);
  fmt::print("\n{:<28} {:>10.1f} TFLOP/s ({} {}³ matmul, measured here)\n", "device matmul rate",
             peak_flops / 1e12, c.train.precision, n);
  fmt::print("{:<28} {:>10.3g} (6·{} matmul parameters + attention {:.3g})\n", "model FLOPs per token",
             flops_per_token, matmul_params, attention_flops);
  fmt::print("{:<28} {:>10.1f}%  ({:.1f} TFLOP/s of model FLOPs)\n", "MFU",
             100.0 * flops_per_token * tokens_per_s / peak_flops, flops_per_token * tokens_per_s / 1e12);
  fmt::print("{:<28} {:>10.2f} GiB\n", "peak memory (allocator)",
             double(harness::train::peak_device_bytes(device)) / double(int64_t(1) << 30));
  // Attention alone, forward + backward, on one micro-batch's shapes, times layers and micro-batches.
  auto& core = model->block_list.front()->attn->core;
  const auto opts = torch::TensorOptions().device(device).dtype(dtype);
  auto q = torch::randn({micro, c.model.heads, L, c.model.head_dim}, opts).requires_grad_();
  auto k = torch::randn_like(q).requires_grad_(), v = torch::randn_like(q).requires_grad_();
  const double attention_s = seconds_per_call([&] { core->forward(q, k, v).sum().backward(); }, 5, device);
  const double share = attention_s * double(c.model.layers) * double(B / micro) / (step_ms / 1e3);
  fmt::print("{:<28} {:>10.1f}%  ({:.2f} ms per layer and micro-batch of {}, kernel {})\n",
             "attention share of a step", 100.0 * share, attention_s * 1e3, micro, c.attention.kernel);
}

// The median of each phase of the timed steps, its share of the step's, and the step's tokens/s.
// Returns the median step in ms.
double print_phases(const std::vector<double>& fwd_bwd, const std::vector<double>& norm,
                    const std::vector<double>& opt, const std::vector<double>& total, int64_t tokens_per_step) {
  const double t = median(total);
  fmt::print("{:<28} {:>10} {:>7}\n", "phase (median)", "ms", "share");
  for (const auto& [name, v] : {std::pair{"forward + backward", &fwd_bwd},
                                std::pair{"gradient norm", &norm}, std::pair{"optimiser step", &opt}})
    fmt::print("{:<28} {:>10.2f} {:>6.1f}%\n", name, median(*v), 100.0 * median(*v) / t);
  fmt::print("{:<28} {:>10.2f}   ({:.0f} tokens/s)\n", "step", t, double(tokens_per_step) / t * 1e3);
  return t;
}

// Runs `steps` more untimed steps under the Kineto profiler (CPU activities) and ranks the
// operators by self time.
void profile_steps(const std::function<void(int)>& untimed_step, int steps, int top) {
  namespace prof = torch::autograd::profiler;
  const std::set<torch::profiler::impl::ActivityType> cpu{torch::profiler::impl::ActivityType::CPU};
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  prof::prepareProfiler(config, cpu);
  prof::enableProfiler(config, cpu);
  for (int i = 0; i < steps; ++i) untimed_step(i);
  print_operator_table(*prof::disableProfiler(), steps, top);
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string config_path = "bench/peer/bench.yaml";
  std::vector<std::string> overrides;
  int steps = 30, warmup = 5, threads = 1, top = 25;
  po::options_description opts("bench_train_step options");
  opts.add_options()("help,h", "this help")(
      "config", po::value(&config_path), "run config (default bench/peer/bench.yaml)")(
      "set", po::value(&overrides)->composing(), "override a key (repeatable)")(
      "steps", po::value(&steps), "timed steps (default 30)")(
      "warmup", po::value(&warmup), "untimed steps first (default 5)")(
      "threads", po::value(&threads), "torch threads (default 1)")(
      "profile", "also rank the operators by self time")(
      "top", po::value(&top), "operators to list (default 25)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (bench::help_requested(opts, vm)) return 0;
  if (steps < 1 || warmup < 0 || threads < 1) throw std::invalid_argument("bad --steps/--warmup/--threads");

  auto configured = bench::configured_model(config_path, overrides, threads);
  const auto& c = configured.loaded.config;
  const int64_t vocab = configured.vocab;
  auto& model = configured.model;
  const torch::Device device = c.run.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  if (device.is_cuda() && !torch::cuda::is_available())
    throw std::invalid_argument("run.device is cuda but this LibTorch sees no CUDA device");
  model->to(device);
  if (device.is_cuda()) {
    harness::train::set_tf32(c.run.tf32);
    harness::train::reset_peak_device_bytes(device);
  }
  models::Optimizers optim(model, c.optim);
  // One step's sequences per forward: train.micro_batch_size when set (gradient accumulation).
  const int64_t B = c.train.batch_size, L = c.train.context;
  const int64_t micro = c.train.micro_batch_size > 0 ? c.train.micro_batch_size : B / c.train.grad_accum;
  model->train();

  std::vector<double> fwd_bwd, norm, opt, total;
  const auto step = [&](int i, bool record) {
    const auto t0 = Clock::now();
    optim.set_lr_factor(models::lr_factor(c.schedule, i, warmup + steps));
    optim.zero_grad();
    const auto batch = torch::randint(0, vocab, {B, L + 1}, torch::kLong).to(device);  // (B, L + 1)
    auto total_loss = torch::zeros({}, torch::TensorOptions().device(device));
    for (int64_t start = 0; start < B; start += micro) {
      const auto rows = batch.slice(0, start, std::min(B, start + micro));
      auto loss = model->loss(rows.slice(1, 0, L), rows.slice(1, 1, L + 1)) * (double(rows.size(0)) / double(B));
      loss.backward();
      total_loss += loss.detach();
    }
    (void)total_loss.item<double>();  // waits for the device
    const auto t1 = Clock::now();
    (void)models::clip_grad_norm(model, c.train.grad_clip);
    const auto t2 = Clock::now();
    optim.step();
    if (device.is_cuda()) (void)model->parameters().front().sum().item<double>();  // the step's end
    if (!record) return;
    fwd_bwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    norm.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    opt.push_back(ms_since(t2));
    total.push_back(ms_since(t0));
  };
  for (int i = 0; i < warmup; ++i) step(i, false);
  for (int i = 0; i < steps; ++i) step(warmup + i, true);

  fmt::print("{}: {} layers, d_model {}, {} heads, method {}, B = {} (micro-batches of {}), L = {}, "
             "optimiser {}, {} on {}, {} thread(s), {} timed steps\n",
             config_path, c.model.layers, c.model.d_model, c.model.heads, c.attention.method, B, micro, L,
             c.optim.name, c.train.precision, device.str(), threads, steps);
  const double t = print_phases(fwd_bwd, norm, opt, total, B * L);
  if (device.is_cuda()) print_device_figures(model, c, device, t, micro);

  if (vm.count("profile")) profile_steps([&](int i) { step(warmup + i, false); }, steps, top);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_train_step", argc, argv, run); }
