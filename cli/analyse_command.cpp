// `harness analyse <run dir | sweep file>`: argument parsing only; the work is
// analysis/analyse_run.h.
#include <fmt/format.h>
#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <thread>

#include "analysis/analyse_run.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/errors.h"
#include "sweeps/run_status.h"
#include "sweeps/sweep_file.h"

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness analyse RUN_DIR|SWEEP_FILE [--contexts 16L,4096] [--windows N | --tokens N]\n"
    "                       [--queries Q] [--batch-size B] [--threads T] [--force]\n"
    "  Attention statistics (entropy, mass by distance band and range, raw-score Gaussianity) and\n"
    "  the validation loss ± its standard error over windows of the final model of a done run, or\n"
    "  of every done run of a sweep, at the given contexts (default: the run's validation\n"
    "  contexts), into run.h5 under /analysis/<T>/attention.\n"
    "examples: harness analyse sweeps/quickstart.yaml --contexts 16L\n"
    "          harness analyse sweeps/table1.yaml --tokens 262144    # then export table --metric analysis/loss";

std::vector<config::ContextValue> parse_contexts(const std::vector<std::string>& items) {
  std::vector<config::ContextValue> out;
  const std::string expected = "a context in tokens or a multiple of L (1024, 16L)";
  for (const auto& text : split_commas(items))
    out.push_back(config::parse_context_value(YAML::Node(text), {"--contexts", 0, 0}, "--contexts", expected));
  return out;
}

}  // namespace

int analyse_command(const Args& args) {
  po::options_description options("analyse options");
  std::string target;
  std::vector<std::string> contexts;
  analysis::AnalyseOptions o;
  int threads = 0;
  po::options_description arguments;
  arguments.add_options()("target", po::value(&target)->required(), "a run directory or a sweep file");
  options.add_options()
      ("contexts", po::value(&contexts)->composing(), "contexts, comma-separated or repeated: 1024, 16L")
      ("windows", po::value(&o.windows)->default_value(0), "validation windows per context; 0: the run's")
      ("tokens", po::value(&o.tokens)->default_value(0), "validation tokens per context: ceil(N / T) windows at T")
      ("queries", po::value(&o.queries)->default_value(0), "positions per window (the last ones); 0: the run's")
      ("batch-size", po::value(&o.batch_size)->default_value(0), "windows per forward pass; 0: the run's")
      ("threads", po::value(&threads)->default_value(0), "CPU threads; 0: all cores")
      ("force", "recompute contexts already analysed at the same settings");
  po::positional_options_description positional;
  positional.add("target", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (o.windows < 0 || o.tokens < 0 || o.queries < 0 || o.batch_size < 0 || threads < 0)
    throw InputError("--windows, --tokens, --queries, --batch-size, --threads: expected 0 or more");
  o.contexts = parse_contexts(contexts);
  o.force = vm.count("force") > 0;
  torch::set_num_threads(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency())));

  const auto print = [](const std::string& line) { fmt::print(stderr, "  {}\n", line); };
  const auto report = [](const analysis::AnalyseOutcome& r) {
    fmt::print("{}: analysed {} context{}{}, {:.1f} s\n", r.run_dir, r.analysed.size(),
               r.analysed.size() == 1 ? "" : "s",
               r.skipped.empty() ? "" : fmt::format(" ({} already done)", r.skipped.size()), r.seconds);
  };
  if (!std::filesystem::exists(target))
    throw InputError(fmt::format("{}: no such run directory or sweep file", target));
  if (std::filesystem::is_directory(target)) {
    fmt::print(stderr, "analysing {}\n", target);
    report(analysis::analyse_run(target, o, print));
    return kExitOk;
  }
  const auto sweep = sweeps::load_sweep(target);
  size_t done = 0, not_done = 0;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const auto& run = sweep.runs[i];
    const auto status = sweeps::inspect_run(run);
    if (status.state != sweeps::RunState::kDone) {
      fmt::print(stderr, "[{}/{}] {} is {}: skipped\n", i + 1, sweep.runs.size(), run.id, sweeps::state_name(status));
      ++not_done;
      continue;
    }
    fmt::print(stderr, "[{}/{}] {} ({})\n", i + 1, sweep.runs.size(), run.id, run.run_dir);
    report(analysis::analyse_run(run.run_dir, o, print));
    ++done;
  }
  fmt::print("sweep {}: {} run{} analysed, {} not done\n", sweep.name, done, done == 1 ? "" : "s", not_done);
  return kExitOk;
}

}  // namespace harness::cli
