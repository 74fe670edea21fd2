// `harness tau check`: argument parsing and printing; the sweep is sweeps/tau_check.h, the verdict
// analysis/tau/verdict.h, the running sweeps/runner.h, the table and figure analysis/export_*.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "analysis/export/export_table.h"
#include "analysis/run_set.h"
#include "analysis/tau/calibration.h"
#include "analysis/tau/check_figure.h"
#include "analysis/tau/law.h"
#include "analysis/tau/law_figure.h"
#include "analysis/tau/verdict.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "sweeps/plan.h"
#include "sweeps/runner.h"
#include "sweeps/tau_check.h"

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness tau check --config FILE [--set key=value]... [--factors 0.1,0.3,1,3,10]\n"
    "                         [--seeds 0,1,2] [--jobs J] [--threads-per-job T] [--margin 0.01]\n"
    "                         [--level 0.95] [--no-run]\n"
    "  Is the config's τ close to the best? Trains it at τ × each factor × each seed as the sweep\n"
    "  <run.out_dir>/tau-check-<run id>/tau-check.yaml — a rerun resumes and skips finished runs, and\n"
    "  `harness sweep submit` that file runs it on Slurm (then `--no-run` reports) — and prints the\n"
    "  validation loss per τ and context with a verdict per context: near-optimal, a better τ exists,\n"
    "  worse, or inconclusive. It compares the config's τ with every other τ by the gap in loss:\n"
    "  seeds paired (the same seed in both), the seed-to-seed spread plus the window-to-window spread\n"
    "  with windows of one document as one unit, Student's t at the smaller degrees of freedom, the\n"
    "  comparisons at one simultaneous --level (Bonferroni). Worse: some τ is better by more than\n"
    "  --margin nats/token; inconclusive: an interval reaches beyond it (add seeds: seeds vary more\n"
    "  than windows, and 3 seeds give 2 degrees of freedom). A best τ at the end of the grid is said\n"
    "  so, with the factors to add. The table, the verdict and the figure go beside the sweep file.\n"
    "example: harness tau check --config sweeps/examples/tiny.yaml --jobs 2 --threads-per-job 1\n\n"
    "usage: harness tau calibrate SWEEP|RUNS_DIR [--arm-seeds 3] [--level 0.95] [--out FILE]\n"
    "  How often the check's interval excludes 0 where there is nothing to find: runs of one τ with\n"
    "  many seeds (sweeps/tau-check-calibration.yaml), split into disjoint arms of --arm-seeds seeds,\n"
    "  arm against arm; the false-alarm rate per context with its Clopper–Pearson interval.\n\n"
    "usage: harness tau law SWEEP|RUNS_DIR | --curves FILE [--level 0.9] [--replicates 4000] [--by KEY]\n"
    "                       [--out DIR]\n"
    "  How the best τ moves with the training context L: runs on a τ grid at several L with 2 or more\n"
    "  seeds (sweeps/tau-law.yaml). Per L and validation context, τ* is the vertex of the quadratic in\n"
    "  ln τ through the grid's best τ and the points within an octave of it (its neighbours on a 2×\n"
    "  grid); its interval a bootstrap over seeds (whole per-seed curves: seeds are paired across τ),\n"
    "  over all replicates, one whose τ* is not located (best τ at the grid's end, a quadratic opening\n"
    "  downward) kept at its bound, so an interval may be open (≤, ≥); the slope k of ln τ* on ln L\n"
    "  with its interval likewise, said in the words the interval allows; the breakdown τ where the\n"
    "  16L loss rises 0.1 above the 1L loss. Each loss is the run's /analysis (`harness analyse`, e.g.\n"
    "  --tokens N) where it has one, else its last validation; the counts are printed. With fewer\n"
    "  than 6 seeds the intervals are too narrow (said). A τ not yet done at every seed of its L is\n"
    "  left out, and said so. --curves: the per-seed losses from a tau-law-curves.csv instead of runs.\n"
    "  --out: also tau-law.md, tau-law.csv, tau-law-curves.csv (L, factor, tau, seed, loss, source)\n"
    "  and the figures (tau_law_star, tau_law_loss_<k>L; CSV beside each). --by KEY: runs that differ\n"
    "  in KEY besides L (e.g. train.batch_size) as separate groups, each with its own law, then τ* of\n"
    "  each pair of groups at a shared L and context as a ratio with its interval (independent\n"
    "  bootstraps); with --out, each group in DIR/KEY=VALUE/ and the ratios in DIR/tau-star-ratios.csv;\n"
    "  --curves given once per group (DIR/KEY=VALUE/tau-law-curves.csv, in the same order) recomputes it.\n"
    "  Runs of one L, τ and seed that differ in another key are refused without --by.";

template <class T>
std::vector<T> parse_list(const std::string& flag, const std::string& text) {
  std::vector<T> out;
  for (const auto& item : split_commas({text})) {
    try {
      size_t used = 0;
      const T v = std::is_integral_v<T> ? T(std::stoll(item, &used)) : T(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}: '{}' is not a {}", flag, item, std::is_integral_v<T> ? "whole number" : "number"));
    }
  }
  if (out.empty()) throw InputError(fmt::format("{}: give at least one value", flag));
  return out;
}

// The table, the verdict and the figure of a tau check's runs, printed and written beside its sweep.
void report_check(const sweeps::TauCheckSweep& plan, int64_t train_context,
                  const analysis::TauVerdictOptions& verdict_options) {
  analysis::TableOptions o;
  o.rows = {"attention.tau"};
  o.cols = {"context"};
  o.window_se = true;
  const auto set = analysis::load_run_set(plan.path);
  const auto table = analysis::build_table(set, o);
  const std::string table_text = analysis::format_table(table, "md");
  std::string verdict;
  std::optional<analysis::FigureFiles> figure;
  const auto dir = std::filesystem::path(plan.path).parent_path();
  if (!table.missing.empty())
    verdict = fmt::format("no verdict yet: {} of {} runs are not done (rerun this command to resume them)\n",
                          table.missing.size(), set.runs.size());
  else {
    const auto grid = analysis::tau_grid(set);
    const auto verdicts = analysis::tau_verdicts(grid, plan.own_tau_text, verdict_options);
    verdict = analysis::format_verdicts(verdicts, train_context, verdict_options);
    figure = analysis::write_tau_check_figure((dir / "figures").string(), grid, verdicts, plan.tau,
                                              train_context);
    for (const auto& context : grid)
      if (!context.documents_known)
        verdict += fmt::format("note: T = {}: the run files do not say which document each window is from (written "
                               "before 2026-12-07): windows counted as independent, the interval too narrow\n",
                               context.context);
  }
  harness::write_file_atomically((dir / "table.md").string(), table_text);
  harness::write_file_atomically((dir / "verdict.txt").string(), verdict);
  fmt::print("\n{}\n{}", table_text, verdict);
  if (figure)
    fmt::print("figure: {}\n", figure->render.images.empty() ? fmt::format("{}", fmt::join(figure->csv, ", "))
                                                             : fmt::format("{}", fmt::join(figure->render.images, ", ")));
  fmt::print("table: {}, verdict: {}\n", (dir / "table.md").string(), (dir / "verdict.txt").string());
}

int check(const Args& args) {
  po::options_description options("tau check options");
  std::string config_path, factors, seeds;
  std::vector<std::string> overrides;
  int jobs = 1, threads = 0;
  analysis::TauVerdictOptions verdict_options;
  options.add_options()
      ("config", po::value(&config_path)->required(), "the run config whose τ to check")
      ("set", po::value(&overrides)->composing(), "override a key of every run: --set train.steps=400 (repeatable)")
      ("factors", po::value(&factors)->default_value("0.1,0.3,1,3,10"), "τ × each factor; must hold 1")
      ("seeds", po::value(&seeds), "seeds, comma-separated, two or more (default: the config's train.seed and the next two)")
      ("jobs,j", po::value(&jobs)->default_value(1), "runs at a time")
      ("threads-per-job", po::value(&threads)->default_value(0), "CPU threads per run; 0: cores / jobs")
      ("margin", po::value(&verdict_options.margin)->default_value(0.01), "nats/token: a τ better by more is a verdict of worse")
      ("level", po::value(&verdict_options.level)->default_value(0.95), "confidence level, simultaneous over the comparisons")
      ("no-run", "train nothing: report on the runs already done (after a Slurm submission)");
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm)) return kExitOk;
  if (jobs < 1) throw InputError(fmt::format("--jobs: expected at least 1, got {}", jobs));
  if (threads < 0) throw InputError(fmt::format("--threads-per-job: expected 0 or more, got {}", threads));
  if (!(verdict_options.margin > 0))
    throw InputError(fmt::format("--margin: expected a number > 0, got {}", verdict_options.margin));
  if (!(verdict_options.level > 0 && verdict_options.level < 1))
    throw InputError(fmt::format("--level: expected a number in (0, 1), got {}", verdict_options.level));

  sweeps::TauCheckSpec spec;
  spec.config_path = config_path;
  spec.overrides = overrides;
  spec.factors = parse_list<double>("--factors", factors);
  if (vm.count("seeds")) spec.seeds = parse_list<int64_t>("--seeds", seeds);
  if (vm.count("seeds") && spec.seeds.size() < 2)
    throw InputError("--seeds: give two or more: one seed cannot measure how much seeds vary (more than "
                     "validation windows do)");
  const auto loaded = load_config_with_overrides(config_path, overrides);
  const auto plan = sweeps::tau_check_sweep(loaded, spec);
  std::filesystem::create_directories(std::filesystem::path(plan.path).parent_path());
  harness::write_file_atomically(plan.path, plan.text);
  const auto sweep = sweeps::load_sweep(plan.path);  // validates every run before anything starts
  fmt::print("tau check: τ = {} × {{{}}}: {} runs, sweep {}\n", plan.tau, factors, sweep.runs.size(), plan.path);

  int code = kExitOk;
  if (!vm.count("no-run")) {
    sweeps::LocalRunOptions run;
    run.jobs = jobs;
    run.threads_per_job = threads;
    code = sweeps::run_sweep(sweep, run);
    if (code == kExitInterrupted) return code;
  }

  report_check(plan, loaded.config.train.context, verdict_options);
  return code;
}

int calibrate(const Args& args) {
  po::options_description options("tau calibrate options");
  std::string input, out;
  int arm_seeds = 3;
  double level = 0.95;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input)->required(), "a sweep file or a directory of runs");
  options.add_options()
      ("arm-seeds", po::value(&arm_seeds)->default_value(3), "seeds per arm (tau check's --seeds count)")
      ("level", po::value(&level)->default_value(0.95), "the interval's confidence level")
      ("out", po::value(&out), "also write the table to FILE");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (arm_seeds < 2) throw InputError(fmt::format("--arm-seeds: expected 2 or more, got {}", arm_seeds));
  if (!(level > 0 && level < 1)) throw InputError(fmt::format("--level: expected a number in (0, 1), got {}", level));
  const auto set = analysis::load_run_set(input);
  const auto rates = analysis::false_alarm_rates(set, arm_seeds, level);
  const int64_t L = set.runs.empty() ? 0 : set.runs.front().train_context;
  const std::string text = analysis::format_false_alarms(rates, arm_seeds, L, level);
  if (!out.empty()) harness::write_file_atomically(out, text);
  fmt::print("{}", text);
  return kExitOk;
}

// The curves from runs or from a tau-law-curves.csv, with what was left out said on stderr.
std::vector<analysis::TauLawCurve> law_curves(const std::string& input, const std::string& curves_path) {
  if (input.empty() == curves_path.empty())
    throw InputError(fmt::format("tau law: give a sweep file or runs directory, or --curves FILE, not {}\n\n{}",
                                 input.empty() ? "neither" : "both", kUsage));
  analysis::TauLawCurves read;
  if (!input.empty()) {
    read = analysis::tau_law_curves(analysis::load_run_set(input));
  } else {
    if (!std::filesystem::is_regular_file(curves_path))
      throw InputError(fmt::format("--curves: {}: no such file", curves_path));
    std::ifstream in(curves_path);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw std::runtime_error(fmt::format("--curves: {}: could not be read", curves_path));
    read = analysis::parse_tau_law_curves_csv(text.str(), curves_path);
  }
  for (const auto& note : read.skipped) fmt::print(stderr, "note: {}\n", note);
  return read.curves;
}

// One law's text, CSV, curves and figures into `dir`; false when a figure failed to render.
bool write_law(const std::filesystem::path& dir, const std::string& text, const analysis::TauLaw& law,
               const std::vector<analysis::TauLawCurve>& curves) {
  std::filesystem::create_directories(dir);
  harness::write_file_atomically((dir / "tau-law.md").string(), text);
  harness::write_file_atomically((dir / "tau-law.csv").string(), analysis::tau_law_csv(law));
  harness::write_file_atomically((dir / "tau-law-curves.csv").string(), analysis::tau_law_curves_csv(curves));
  bool ok = true;
  for (const auto& f : analysis::write_tau_law_figures(dir.string(), curves, law).figures) {
    fmt::print("{}: {}\n", f.name, f.render.images.empty() ? fmt::format("{}", fmt::join(f.csv, ", "))
                                                          : fmt::format("{}", fmt::join(f.render.images, ", ")));
    ok = ok && !f.render.failed;
  }
  return ok;
}

// One group of a `tau law --by` (or of several --curves files): its name and curves.
struct LawGroup {
  std::string name;
  std::vector<analysis::TauLawCurve> curves;
};

// The groups of `--by KEY`: the runs by their value of KEY, in the runs' order.
std::vector<LawGroup> groups_by(const std::string& input, const std::string& key) {
  std::vector<LawGroup> groups;
  for (const auto& [value, set] : analysis::split_run_set(analysis::load_run_set(input), key)) {
    LawGroup g{fmt::format("{}={}", key, value), {}};
    const auto read = analysis::tau_law_curves(set);
    for (const auto& note : read.skipped) fmt::print(stderr, "note: {}: {}\n", g.name, note);
    g.curves = read.curves;
    groups.push_back(std::move(g));
  }
  return groups;
}

// A law per group, then τ* between each pair of groups; each group's bootstrap its own generator
// (seed, seed + 1, … in order), so that the same groups in the same order give the same numbers
// from runs (--by) and from the curves files --out wrote (--curves DIR/KEY=VALUE/… repeated).
int law_groups(const std::vector<LawGroup>& groups, const std::string& what, const analysis::TauLawOptions& o,
               const std::string& out) {
  std::vector<analysis::TauLaw> laws;
  std::vector<std::string> texts;
  for (size_t i = 0; i < groups.size(); ++i) {
    auto options = o;
    options.seed = o.seed + i;  // independent bootstraps: different runs
    laws.push_back(analysis::tau_law(groups[i].curves, options));
    texts.push_back(analysis::format_tau_law(laws.back()));
    fmt::print("## {}\n\n{}\n", groups[i].name, texts.back());
  }
  std::vector<analysis::TauStarRatio> ratios;
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t j = i + 1; j < groups.size(); ++j)
      for (const auto& r : analysis::compare_tau_star(laws[i], groups[i].name, laws[j], groups[j].name))
        ratios.push_back(r);
  fmt::print("## τ* between {}\n\n{}", what, analysis::format_tau_star_ratios(ratios, o.level));
  if (out.empty()) return kExitOk;
  bool ok = true;
  for (size_t i = 0; i < groups.size(); ++i)
    ok = write_law(std::filesystem::path(out) / groups[i].name, texts[i], laws[i], groups[i].curves) && ok;
  harness::write_file_atomically((std::filesystem::path(out) / "tau-star-ratios.csv").string(),
                                 analysis::tau_star_ratios_csv(ratios));
  return ok ? kExitOk : harness::kExitFailure;
}

int law(const Args& args) {
  po::options_description options("tau law options");
  std::string input, out, by;
  std::vector<std::string> curves_paths;
  analysis::TauLawOptions o;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input), "a sweep file or a directory of runs");
  options.add_options()
      ("curves", po::value(&curves_paths), "read the per-seed losses from this tau-law-curves.csv instead of runs; "
                                            "repeated: one group each, named by its folder (what --by --out wrote)")
      ("level", po::value(&o.level)->default_value(0.9), "the intervals' confidence level")
      ("replicates", po::value(&o.replicates)->default_value(4000), "bootstrap replicates")
      ("by", po::value(&by), "a law per value of this key (e.g. train.batch_size), then τ* between the groups")
      ("out", po::value(&out), "also write tau-law.md, tau-law.csv, tau-law-curves.csv and the figures into DIR");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (!(o.level > 0 && o.level < 1)) throw InputError(fmt::format("--level: expected a number in (0, 1), got {}", o.level));
  if (o.replicates < 100) throw InputError(fmt::format("--replicates: expected 100 or more, got {}", o.replicates));
  if (!by.empty()) {
    if (!curves_paths.empty() || input.empty())
      throw InputError("tau law: --by splits runs: give a sweep file or runs directory (a tau-law-curves.csv has no "
                       "other keys; give each group's file with --curves instead)");
    return law_groups(groups_by(input, by), "the values of " + by, o, out);
  }
  if (curves_paths.size() > 1) {
    if (!input.empty()) throw InputError(fmt::format("tau law: give runs or --curves files, not both\n\n{}", kUsage));
    std::vector<LawGroup> groups;
    for (const auto& path : curves_paths)
      groups.push_back({std::filesystem::path(path).parent_path().filename().string(), law_curves("", path)});
    return law_groups(groups, "the groups", o, out);
  }
  const auto curves = law_curves(input, curves_paths.empty() ? "" : curves_paths[0]);
  const auto law = analysis::tau_law(curves, o);
  const std::string text = analysis::format_tau_law(law);
  fmt::print("{}", text);
  if (out.empty()) return kExitOk;
  return write_law(out, text, law, curves) ? kExitOk : harness::kExitFailure;
}

}  // namespace

int tau_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("{}\n", kUsage);
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "check") return check(rest);
  if (args[0] == "calibrate") return calibrate(rest);
  if (args[0] == "law") return law(rest);
  throw InputError(fmt::format("tau: unknown action '{}'; expected check, calibrate or law\n\n{}", args[0], kUsage));
}

}  // namespace harness::cli
