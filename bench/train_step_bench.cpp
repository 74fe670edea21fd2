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
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "cli/options.h"
#include "harness/config/engine_options.h"
#include "models/gpt.h"
#include "models/optimizers.h"
#include "models/schedule.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

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
  models::Optimizers optim(model, c.optim);
  const int64_t B = c.train.batch_size, L = c.train.context;
  model->train();

  std::vector<double> fwd_bwd, norm, opt, total;
  const auto step = [&](int i, bool record) {
    const auto t0 = Clock::now();
    optim.set_lr_factor(models::lr_factor(c.schedule, i, warmup + steps));
    optim.zero_grad();
    const auto batch = torch::randint(0, vocab, {B, L + 1}, torch::kLong);  // (B, L + 1)
    auto loss = model->loss(batch.slice(1, 0, L), batch.slice(1, 1, L + 1));
    loss.backward();
    (void)loss.item<double>();
    const auto t1 = Clock::now();
    (void)models::clip_grad_norm(model, c.train.grad_clip);
    const auto t2 = Clock::now();
    optim.step();
    if (!record) return;
    fwd_bwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    norm.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    opt.push_back(ms_since(t2));
    total.push_back(ms_since(t0));
  };
  for (int i = 0; i < warmup; ++i) step(i, false);
  for (int i = 0; i < steps; ++i) step(warmup + i, true);

  fmt::print("{}: {} layers, d_model {}, {} heads, method {}, B = {}, L = {}, optimiser {}, "
             "{} thread(s), {} timed steps\n",
             config_path, c.model.layers, c.model.d_model, c.model.heads, c.attention.method, B, L,
             c.optim.name, threads, steps);
  const double t = median(total);
  fmt::print("{:<28} {:>10} {:>7}\n", "phase (median)", "ms", "share");
  for (const auto& [name, v] : {std::pair{"forward + backward", &fwd_bwd},
                                std::pair{"gradient norm", &norm}, std::pair{"optimiser step", &opt}})
    fmt::print("{:<28} {:>10.2f} {:>6.1f}%\n", name, median(*v), 100.0 * median(*v) / t);
  fmt::print("{:<28} {:>10.2f}   ({:.0f} tokens/s)\n", "step", t, double(B * L) / t * 1e3);

  if (vm.count("profile")) {
    namespace prof = torch::autograd::profiler;
    const std::set<torch::profiler::impl::ActivityType> cpu{torch::profiler::impl::ActivityType::CPU};
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
    prof::prepareProfiler(config, cpu);
    prof::enableProfiler(config, cpu);
    for (int i = 0; i < steps; ++i) step(warmup + i, false);
    print_operator_table(*prof::disableProfiler(), steps, top);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_train_step", argc, argv, run); }
