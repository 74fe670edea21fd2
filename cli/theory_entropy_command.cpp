// `harness theory entropy`: argument parsing only; the Monte Carlo is analysis/theory/theory_entropy.h.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "analysis/export_curves.h"
#include "analysis/theory/theory_entropy.h"
#include "attention/statistics.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/errors.h"

namespace harness::cli {

int theory_entropy_command(const Args& args) {
  const char* usage =
      "usage: harness theory entropy [--out FILE] [--trials N] [--tau T]... [--logn-scale S]\n"
      "                              [--max-keys N] [--range-keys N] [--quick] [--threads T]\n"
      "                              [--figures DIR]\n"
      "  Attention over N keys with IID N(0,1) raw scores, per transform (standard, LogN,\n"
      "  scale-invariant at each τ): entropy, band mass and entropy, recent-100 mass against N;\n"
      "  entropy and mass in [t, tΔ) with fits against ln t and √(ln t); Lemma 1's total attention.\n"
      "  --quick writes runs/theory/entropy-quick.h5 unless --out is given (never the full run's file).\n"
      "example: harness theory entropy --tau 10 --tau 0.16 --out runs/theory/entropy.h5";
  po::options_description options("theory entropy options");
  analysis::EntropyTheoryOptions o;
  const std::string default_out = "runs/theory/entropy.h5", quick_out = "runs/theory/entropy-quick.h5";
  std::string out = default_out;
  std::vector<double> taus;
  int64_t max_keys = 100000;
  int threads = 0;
  std::string figures_dir;
  options.add_options()
      ("out", po::value(&out)->default_value(out), "the HDF5 file to write (--quick: runs/theory/entropy-quick.h5)")
      ("trials", po::value(&o.trials)->default_value(o.trials), "rows of N IID logits per N")
      ("tau", po::value(&taus)->composing(), "a scale-invariant τ (repeatable; default 10)")
      ("logn-scale", po::value(&o.logn_scale)->default_value(o.logn_scale, fmt::format("{:g}", o.logn_scale)),
       "LogN's s: logit = s·ln N·score")
      ("max-keys", po::value(&max_keys)->default_value(max_keys), "the N grid: 10 … max-keys, 4 per decade")
      ("range-keys", po::value(&o.range_keys)->default_value(o.range_keys), "N of the range experiment (Figs 2, 6, Lemma 1)")
      ("seed", po::value(&o.seed)->default_value(0), "random seed")
      ("quick", "a small run for a first look: 64 trials, N up to 10^4")
      ("threads", po::value(&threads)->default_value(0), "CPU threads; 0: all cores")
      ("figures", po::value(&figures_dir), "also draw the theory's figures into DIR (as export curves does)");
  po::variables_map vm;
  if (!parse(usage, args, options, vm)) return kExitOk;
  if (vm.count("quick")) {
    o.trials = 64;
    max_keys = 10000;
    o.range_keys = 10000;
    if (vm["out"].defaulted()) out = quick_out;  // a quick look never replaces the full run's file
  }
  if (!taus.empty()) o.taus = taus;
  if (!figures_dir.empty() && std::filesystem::exists(figures_dir) && !std::filesystem::is_directory(figures_dir))
    throw InputError(fmt::format("--figures {}: exists and is not a directory", figures_dir));
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
  fmt::print("wrote {} in {:.1f} s\n", out, seconds);
  if (figures_dir.empty()) {
    fmt::print("figures: harness theory entropy ... --figures DIR, or harness export curves {} --out DIR\n", out);
    return kExitOk;
  }
  const auto figures = analysis::export_curves(out, {figures_dir, ""});
  for (const auto& f : figures.figures)
    fmt::print("{}: {}\n", f.name, f.render.images.empty() ? f.render.notice : fmt::format("{}", fmt::join(f.render.images, ", ")));
  return kExitOk;
}

}  // namespace harness::cli
