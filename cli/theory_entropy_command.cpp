// `harness theory entropy`: argument parsing only; the Monte Carlo is analysis/theory_entropy.h.
#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>

#include "analysis/theory_entropy.h"
#include "attention/statistics.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "harness/util/errors.h"

namespace harness::cli {

int theory_entropy_command(const Args& args) {
  const char* usage =
      "usage: harness theory entropy [--out FILE] [--trials N] [--tau T]... [--logn-scale S]\n"
      "                              [--max-keys N] [--range-keys N] [--quick] [--threads T]\n"
      "  Attention over N keys with IID N(0,1) raw scores, per transform (standard, LogN,\n"
      "  scale-invariant at each τ): entropy, band mass and entropy, recent-100 mass against N;\n"
      "  entropy and mass in [t, tΔ) with fits against ln t and √(ln t); Lemma 1's total attention.";
  po::options_description options("theory entropy options");
  analysis::EntropyTheoryOptions o;
  std::string out = "runs/theory/entropy.h5";
  std::vector<double> taus;
  int64_t max_keys = 100000;
  int threads = 0;
  options.add_options()
      ("out", po::value(&out)->default_value(out), "the HDF5 file to write")
      ("trials", po::value(&o.trials)->default_value(o.trials), "rows of N IID logits per N")
      ("tau", po::value(&taus)->composing(), "a scale-invariant τ (repeatable; default 10)")
      ("logn-scale", po::value(&o.logn_scale)->default_value(o.logn_scale), "LogN's s: logit = s·ln N·score")
      ("max-keys", po::value(&max_keys)->default_value(max_keys), "the N grid: 10 … max-keys, 4 per decade")
      ("range-keys", po::value(&o.range_keys)->default_value(o.range_keys), "N of the range experiment (Figs 2, 6, Lemma 1)")
      ("seed", po::value(&o.seed)->default_value(0), "random seed")
      ("quick", "a small run for a first look: 64 trials, N up to 10^4")
      ("threads", po::value(&threads)->default_value(0), "CPU threads; 0: all cores");
  po::variables_map vm;
  if (!parse(usage, args, options, vm)) return kExitOk;
  if (vm.count("quick")) {
    o.trials = 64;
    max_keys = 10000;
    o.range_keys = 10000;
  }
  if (!taus.empty()) o.taus = taus;
  if (max_keys < 10 || o.trials < 2)
    throw InputError("--max-keys: expected at least 10; --trials: expected at least 2");
  for (const int64_t n : attention::log_grid(max_keys))
    if (n >= 10) o.contexts.push_back(n);
  torch::set_num_threads(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())));
  const auto start = std::chrono::steady_clock::now();
  std::vector<analysis::TheoryTransform> theory;
  try {
    theory = analysis::entropy_theory(o, [](const std::string& line) { fmt::print(stderr, "  {}\n", line); });
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  analysis::write_entropy_theory(out, o, theory);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{:<28} {:>10} {:>12} {:>14}\n", "transform", "N", "entropy", "recent mass");
  for (const auto& t : theory) {
    const auto& n = t.datasets.integers.at("context");
    const auto& h = t.datasets.arrays.at("entropy").values;
    const auto& se = t.datasets.arrays.at("entropy_se").values;
    const auto& recent = t.datasets.arrays.at("recent_mass").values;
    for (const size_t i : {size_t(0), n.size() / 2, n.size() - 1})
      fmt::print("{:<28} {:>10} {:>7.4f}±{:.4f} {:>14.4f}\n", t.name, n[i], h[i], se[i], recent[i]);
  }
  fmt::print("wrote {} in {:.1f} s; figures: harness export curves {} --out DIR\n", out, seconds, out);
  return kExitOk;
}

}  // namespace harness::cli
