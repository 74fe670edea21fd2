#include <fmt/format.h>

#include "analysis/theory/critical_scaling_config.h"
#include "attention/parameters.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "harness/config/schema.h"
#include "common/errors.h"

namespace harness::cli {

namespace {

// The paper's constants assume its training context L = 4096: τ = 10 ≈ L/400, p-RoPE's base
// 1024 = L/4 (each parameter's paper_ratio, attention/parameters.h). A config far from those
// ratios (the defaults at a CPU-scale L, say) is legal, but a user should hear it: at L = 64 with
// τ = 10 scale-invariant p-RoPE does not generalise (docs/configs.md, "Why τ and the p-RoPE base
// scale with L").
std::vector<std::string> scale_notes(const config::RunConfig& c) {
  std::vector<std::string> notes;
  const double L = double(c.train.context);
  for (const auto& p : attention::parameters()) {
    const std::string key = std::string("attention.") + p.name;
    if (p.paper_ratio <= 0 || !config::find_key(key)->is_read(c)) continue;
    const double v = c.attention.parameters[p.id].resolve(c.train.context);
    const double ratio = L / v;
    if (v > 0 && (ratio > 4 * p.paper_ratio || ratio < p.paper_ratio / 4))
      notes.push_back(fmt::format("{} = {:g} is L/{:.3g} at train.context {}; the paper's value is "
                                  "about L/{:g} (at L = 4096): write {}: L/{:g} to keep that ratio",
                                  key, v, ratio, c.train.context, p.paper_ratio, p.name, p.paper_ratio));
  }
  return notes;
}

}  // namespace

int config_command(const Args& args) {
  const std::string usage =
      "usage: harness config keys                      every config key, its type and default\n"
      "                                                (run configs and critical-scaling files)\n"
      "       harness config show --config FILE [--set key=value]...\n"
      "                                                the resolved config and its run id\n"
      "example: harness config show --config sweeps/examples/tiny.yaml --set attention.tau=L/400";
  po::options_description options("config options");
  std::string action, config_path;
  std::vector<std::string> overrides;
  po::options_description arguments;
  arguments.add_options()("action", po::value(&action)->required(), "keys | show");
  options.add_options()
      ("config,c", po::value(&config_path), "run config (YAML)")
      ("set", po::value(&overrides)->composing(), "override a key (repeatable)");
  po::positional_options_description positional;
  positional.add("action", 1);
  po::variables_map vm;
  if (!parse(usage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (action == "keys") {  // both key tables of the one validator (harness/config/key_table.h)
    fmt::print("# run configs (harness train, sweep run|plan, config show)\n{}\n"
               "# experiment: critical-scaling files (harness theory critical --config FILE; sweep run|plan FILE)\n{}",
               config::schema_reference(), analysis::critical_scaling_reference());
    return kExitOk;
  }
  if (action == "show") {
    if (config_path.empty()) throw InputError("config show: --config FILE is required\n" + usage);
    const auto loaded = load_config_with_overrides(config_path, overrides);
    fmt::print("# run id {}\n{}", config::config_hash(loaded.config),
               config::canonical_text(loaded.config, false));
    for (const auto& note : scale_notes(loaded.config)) fmt::print(stderr, "note: {}\n", note);
    return kExitOk;
  }
  throw InputError(fmt::format("config: unknown action '{}'; expected keys or show\n{}", action, usage));
}

}  // namespace harness::cli
