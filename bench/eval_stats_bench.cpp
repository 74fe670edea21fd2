// What the attention statistics (#10: entropy, band and range mass/entropy, recent mass, per
// layer and head) add to one validation pass: `harness train` validates with them on
// (eval.attention_queries > 0), this measures the pass with and without them, side by side in one
// run (interleaved repetitions, medians), at each validation context. Not a test.
//
//   bench_eval_stats [--config FILE] [--set key=value]... [--contexts 64,1024,16384]
//                    [--windows N] [--reps N] [--threads N] [--raw-scores]
//
// The model comes from the run config (default sweeps/examples/tiny.yaml: the
// quickstart's 2-layer, width-128 si+p-rope GPT) with its initial weights; windows are uniform
// random tokens, so no corpus is needed. The statistics' cost does not depend on the weights: it
// is O(queries · T) per head and layer, against the pass's O(T²).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "harness/config/engine_options.h"
#include "harness/train/evaluate.h"
#include "models/gpt.h"

namespace {

using bench::Clock;
using bench::median;

std::vector<int64_t> parse_contexts(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

int run(int argc, char** argv) {
  namespace po = boost::program_options;
  std::string config_path = "sweeps/examples/tiny.yaml", contexts_text;
  std::vector<std::string> overrides;
  int reps = 5, threads = 2;
  int64_t windows = 0;
  po::options_description opts("bench_eval_stats options");
  opts.add_options()("help,h", "this help")(
      "config", po::value(&config_path), "run config (default sweeps/examples/tiny.yaml)")(
      "set", po::value(&overrides)->composing(), "override a key (repeatable)")(
      "contexts", po::value(&contexts_text), "contexts, comma-separated (default: the config's)")(
      "windows", po::value(&windows), "windows per context (default: eval.windows)")(
      "reps", po::value(&reps), "timed repetitions of each variant (default 5)")(
      "threads", po::value(&threads), "torch threads (default 2)")(
      "raw-scores", "also the raw-score moments and QQ quantiles (what `harness analyse` adds)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  po::notify(vm);
  if (bench::help_requested(opts, vm)) return 0;
  if (reps < 1 || threads < 1 || windows < 0) throw std::invalid_argument("bad --reps/--threads/--windows");

  auto configured = bench::configured_model(config_path, overrides, threads);
  const auto& c = configured.loaded.config;
  const int64_t vocab = configured.vocab;
  auto& model = configured.model;
  const auto contexts = contexts_text.empty() ? c.eval_contexts() : parse_contexts(contexts_text);
  const int64_t N = windows > 0 ? windows : c.eval.windows;
  const int64_t queries = harness::train::statistics_queries(c.eval.attention_queries);
  const bool raw = vm.count("raw-scores") > 0;

  fmt::print("{}: {} layers, d_model {}, {} heads, method {}, {} windows per context, batch {}, "
             "statistics of the last {} positions per window{}, {} thread(s), medians of {} "
             "interleaved repetitions\n",
             config_path, c.model.layers, c.model.d_model, c.model.heads, c.attention.method, N,
             c.eval.batch_size, queries, raw ? " with raw scores" : "", threads, reps);
  fmt::print("| T | validation ms | with statistics ms | added |\n| --- | --- | --- | --- |\n");
  for (const int64_t T : contexts) {
    harness::data::EvalWindows w;
    w.context = T;
    w.tokens = torch::randint(0, vocab, {N, T + 1}, torch::kLong);  // (N, T + 1)
    w.requested = N;
    const auto time = [&](int64_t q) {
      const auto t0 = Clock::now();
      (void)harness::train::evaluate(model, w, c.eval.batch_size, c.eval.position_buckets,
                                     torch::kCPU, q, raw);
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    time(0), time(queries);  // warm-up: allocator, thread pool, kernels' first touch
    std::vector<double> plain, with_stats;
    for (int r = 0; r < reps; ++r) {
      plain.push_back(time(0));
      with_stats.push_back(time(queries));
    }
    const double a = median(plain), b = median(with_stats);
    fmt::print("| {} | {:.1f} | {:.1f} | {:+.1f}% |\n", T, a, b, 100.0 * (b - a) / a);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::main_with("bench_eval_stats", argc, argv, run); }
