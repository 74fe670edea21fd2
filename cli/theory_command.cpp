// `harness theory <experiment>`: numerical experiments on the theory behind the methods, argument
// parsing only; the experiments live in analysis/: `entropy` (IID Gaussian logits per transform,
// arXiv 2505.17083; cli/theory_entropy_command.cpp, analysis/theory/theory_entropy.h) and `critical`
// (critical attention scaling, arXiv 2510.05554; analysis/theory/critical_scaling.h).
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "analysis/theory/critical_figures.h"
#include "analysis/theory/critical_scaling.h"
#include "analysis/theory/critical_scaling_config.h"
#include "analysis/theory/critical_scaling_file.h"
#include "analysis/critical_trained.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/errors.h"
#include "common/progress.h"

namespace fs = std::filesystem;

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness theory critical [--config FILE | --quick] [--out FILE.h5] [--figures DIR]\n"
    "                               [--run DIR]... [--threads N] [--plan]\n"
    "         one attention step with logits scaled by gamma*ln n on correlated tokens: the\n"
    "         collapse / critical / identity transition at gamma_c = 1/(1 - rho) (arXiv 2510.05554)\n"
    "The grid comes from FILE (experiment: critical-scaling; sweeps/critical-scaling.yaml is the\n"
    "default grid, annotated), from --quick (a seconds-long smoke grid), or is the default grid.\n"
    "examples:\n"
    "  harness theory critical --quick --figures runs/theory/figures-quick --out runs/theory/critical-quick.h5\n"
    "  harness theory critical --config sweeps/critical-scaling.yaml --plan";

const char* kDefaultOut = "runs/theory/critical-scaling.h5";

// Whether this process can create files in `dir` (an existing directory): a probe file is created
// and removed again. access(W_OK) is not enough: it says yes to root everywhere, /proc included.
bool can_create_files_in(const fs::path& dir) {
  const fs::path probe = dir / fmt::format(".harness-write-probe-{}", ::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) return false;
  std::fclose(f);
  std::error_code ec;
  fs::remove(probe, ec);
  return true;
}

// Throws InputError unless `path` could be written (as a file, or as a directory when `directory`)
// by this process, so that an unwritable --out or --figures fails before the grid runs, not after:
// the nearest existing ancestor must be a directory this process can create files in.
void check_writable(const std::string& option, const std::string& path, bool directory) {
  const fs::path p = fs::absolute(path);
  if (!directory && fs::is_directory(p))
    throw InputError(fmt::format("{} {}: is a directory, expected a file path", option, path));
  if (directory && fs::exists(p) && !fs::is_directory(p))
    throw InputError(fmt::format("{} {}: exists and is not a directory", option, path));
  fs::path dir = directory ? p : p.parent_path();
  while (!dir.empty() && !fs::exists(dir)) dir = dir.parent_path();
  if (!fs::is_directory(dir) || !can_create_files_in(dir))
    throw InputError(fmt::format("{} {}: cannot write there ({} is not a writable directory)", option,
                                 path, dir.string()));
}

std::string duration(double seconds) {
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.0f} min {:02.0f} s", std::floor(seconds / 60), std::fmod(seconds, 60));
}

int critical(const Args& args) {
  po::options_description options("theory critical options");
  std::string config_path, out = kDefaultOut, figures_dir;
  std::vector<std::string> run_dirs;
  int64_t threads = -1, run_context = 0, run_windows = 16;
  options.add_options()
      ("config,c", po::value(&config_path), "grid file (YAML, experiment: critical-scaling)")
      ("quick", "a small grid (n 256, d 4 and 64, three rho): a smoke run of a few seconds")
      ("out,o", po::value(&out)->default_value(kDefaultOut), "HDF5 file to write (atomically)")
      ("figures,f", po::value(&figures_dir), "also render the figures and the gamma_c table into DIR")
      ("run", po::value(&run_dirs)->composing(),
       "a finished LogN run directory: report its heads' effective gamma next to gamma_c from its "
       "key cosines (repeatable)")
      ("run-context", po::value(&run_context)->default_value(0),
       "tokens per window for --run's key cosines; 0: the run's training context")
      ("run-windows", po::value(&run_windows)->default_value(16), "validation windows for --run")
      ("threads,t", po::value(&threads), "CPU threads; default: the file's `threads` (0: every core)")
      ("plan", "print the grid and the work it implies; run and write nothing");
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm))
    return kExitOk;
  if (!config_path.empty() && vm.count("quick"))
    throw InputError("theory critical: give --config FILE or --quick, not both");
  if (vm.count("threads") && (threads < 0 || threads > 1024))
    throw InputError(fmt::format("--threads: expected 0 (every core) to 1024, got {}", threads));
  if (run_windows < 1) throw InputError(fmt::format("--run-windows: expected at least 1, got {}", run_windows));
  if (run_context < 0) throw InputError(fmt::format("--run-context: expected 0 or more, got {}", run_context));

  auto config = !config_path.empty() ? analysis::load_critical_scaling_config(config_path)
                : vm.count("quick")  ? analysis::quick_critical_scaling_config()
                                     : analysis::default_critical_scaling_config();
  if (vm.count("threads")) config.threads = threads;
  if (vm.count("plan")) {
    fmt::print("{}output: {}{}\n", analysis::describe_plan(config), out,
               figures_dir.empty() ? "" : fmt::format(", figures in {}/", figures_dir));
    return kExitOk;
  }
  check_writable("--out", out, false);
  if (!figures_dir.empty()) check_writable("--figures", figures_dir, true);

  // Trained runs first: a bad run directory is an input error before minutes of simulation.
  std::vector<analysis::TrainedLognReport> trained;
  for (const auto& dir : run_dirs) {
    fmt::print(stderr, "measuring the keys of {} ...\n", dir);
    trained.push_back(analysis::trained_logn_report(dir, run_context, run_windows));
  }

  fmt::print(stderr, "{}", analysis::describe_plan(config));
  const bool terminal = stderr_is_terminal();
  const auto result = analysis::run_critical_scaling(config, [&](const analysis::GridProgress& p) {
    const double left = p.seconds / p.work_done * (p.work_total - p.work_done);
    const std::string line = fmt::format(
        "[{:>4}/{}] n {:>5} d {:>4} rho {:.2f}: c_in {:.3f}, gamma_c_hat {:.3f} (1/(1-rho) {:.3f})"
        "  {} elapsed, ~{} left",
        p.done, p.total, p.n, p.d, p.rho, p.c_in, p.gamma_c_hat, 1.0 / (1.0 - p.rho),
        duration(p.seconds), duration(left));
    if (terminal)
      fmt::print(stderr, "\r\033[K{}{}", line, p.done == p.total ? "\n" : "");
    else
      fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
  });
  analysis::write_critical_scaling_file(out, result, trained);
  fmt::print("critical-scaling grid: {} cells x {} gamma in {} on {} thread(s); wrote {}\n\n",
             result.N * result.D * result.R, result.G, duration(result.seconds), result.threads, out);
  fmt::print("{}\n", analysis::format_gamma_c_table(result));
  for (const auto& t : trained) fmt::print("{}\n", analysis::format_trained_report(t));
  if (!figures_dir.empty()) {
    const auto figures = analysis::export_critical_scaling_figures(out, figures_dir);
    for (const auto& notice : figures.notices) fmt::print(stderr, "note: {}\n", notice);
    fmt::print("figures: {} files in {}/\n", figures.files.size(), figures_dir);
  }
  return kExitOk;
}

}  // namespace

int theory_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("usage: harness theory <experiment> [options]   (harness theory <experiment> --help)\n"
               "experiments:\n"
               "  entropy    entropy and attention mass of IID Gaussian logits per transform (arXiv 2505.17083)\n"
               "  critical   critical attention scaling gamma*ln n (arXiv 2510.05554)\n"
               "examples:\n"
               "  harness theory entropy --quick --tau 0.16\n"
               "  harness theory critical --quick\n");
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const std::string experiment = args[0];
  const Args rest(args.begin() + 1, args.end());
  if (experiment == "critical") return critical(rest);
  if (experiment == "entropy") return theory_entropy_command(rest);
  throw InputError(fmt::format("theory: unknown experiment '{}'; expected: entropy, critical\n\n{}",
                               experiment, kUsage));
}

}  // namespace harness::cli
