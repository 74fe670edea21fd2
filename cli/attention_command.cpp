#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "attention/inspect.h"
#include "attention/parameters.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "harness/config/engine_options.h"
#include "common/errors.h"

namespace harness::cli {

namespace {

std::vector<int64_t> parse_distances(const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& item : split_commas({text})) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--distances: '{}' is not a non-negative integer (expected a "
                                   "comma-separated list such as 0,1,10,100)", item));
    }
  }
  if (out.empty()) throw InputError("--distances: expected at least one distance");
  return out;
}

// The config `attention inspect` describes: FILE, or the tiny default model, with each flag given
// applied as the config key it stands for, so that flags are validated and resolved like a config
// file and an error points at the flag. flag_keys: the parameters' flags and their keys.
config::LoadedConfig inspected_config(const std::string& config_path, const po::variables_map& vm,
                                      std::vector<std::pair<std::string, std::string>> flag_keys) {
  std::vector<std::string> sets;
  flag_keys.insert(flag_keys.end(),
                   {{"method", "attention.method"},
                    {"positional", "attention.positional"},
                    {"transform", "attention.transform"},
                    {"p-rope-fraction", "attention.p_rope_fraction"},
                    {"p-rope-variant", "attention.p_rope_variant"},
                    {"heads", "model.heads"},
                    {"head-dim", "model.head_dim"},
                    {"train-context", "train.context"}});
  std::map<std::string, std::string> flag_of;  // key → "--flag value", where errors point
  for (const auto& [flag, key] : flag_keys)
    if (vm.count(flag)) {
      sets.push_back(fmt::format("{}={}", key, vm[flag].as<std::string>()));
      flag_of[key] = fmt::format("--{} {}", flag, vm[flag].as<std::string>());
    }
  // Without a config: the tiny default model, so heads × head_dim need not divide anything.
  config::LoadedConfig loaded;
  if (config_path.empty()) {
    loaded = config::load_run_config_text("model: {d_model: 128, heads: 4}", "<defaults>");
    std::vector<std::string> with_head_dim = sets;
    for (const auto& s : sets)
      if (s.rfind("model.heads=", 0) == 0 && !vm.count("head-dim")) with_head_dim.push_back("model.head_dim=32");
    sets = with_head_dim;
  } else {
    loaded = config::load_run_config(config_path);
  }
  for (const auto& item : sets) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    config::apply_override(loaded, key, YAML::Load(item.substr(eq + 1)),
                           {flag_of.count(key) ? flag_of[key] : "--set " + item, 0, 0});
  }
  config::resolve_and_validate(loaded);
  note_unread_keys(loaded.config, flag_of);
  return loaded;
}

}  // namespace

// `harness attention inspect`: what a method does to the logit at each distance. Values such as
// --tau L/400 are read by the config schema, so they resolve exactly as in a run config.
int attention_command(const Args& args) {
  const std::string usage =
      "usage: harness attention inspect --method NAME [--tau V] [--distances 0,1,10,100,1000]\n"
      "                                 [--context T] [--train-context L] [--config FILE]\n"
      "  V may be absolute (10) or relative to L (L/400). With --config, the method is the\n"
      "  config's and the other options override it.\n"
      "example: harness attention inspect --method si+p-rope --tau L/400 --train-context 64 --context 1024";
  po::options_description options("attention inspect options");
  std::string action, distances = "0,1,10,100,1000", config_path;
  po::options_description arguments;
  arguments.add_options()("action", po::value(&action)->required(), "inspect");
  options.add_options()
      ("config,c", po::value(&config_path), "start from this run config")
      ("method", po::value<std::string>(), "preset (see harness config keys)")
      ("positional", po::value<std::string>(), "override the positional encoding")
      ("transform", po::value<std::string>(), "override the logit transform")
      ("p-rope-fraction", po::value<std::string>(), "fraction of rotated pairs")
      ("p-rope-variant", po::value<std::string>(), "respread | truncate")
      ("heads", po::value<std::string>(), "attention heads (ALiBi slopes)")
      ("head-dim", po::value<std::string>(), "head dimension (RoPE frequencies)")
      ("train-context", po::value<std::string>(), "training context L")
      ("context", po::value<int64_t>(), "evaluation context T (default L)")
      ("distances", po::value(&distances), "comma-separated distances t = i - j");
  // One flag per declared parameter (attention/parameters.h): attention.p_rope_base is --p-rope-base.
  std::vector<std::pair<std::string, std::string>> flag_keys;
  for (const auto& p : attention::parameters()) {
    std::string flag = p.name;
    std::replace(flag.begin(), flag.end(), '_', '-');
    options.add_options()(flag.c_str(), po::value<std::string>(), p.help);
    flag_keys.emplace_back(flag, std::string("attention.") + p.name);
  }
  po::positional_options_description positional;
  positional.add("action", 1);
  po::variables_map vm;
  if (!parse(usage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (action != "inspect")
    throw InputError(fmt::format("attention: unknown action '{}'; expected inspect\n{}", action, usage));

  const config::LoadedConfig loaded = inspected_config(config_path, vm, flag_keys);
  const auto method = config::method_options(loaded.config);
  const int64_t T = vm.count("context") ? vm["context"].as<int64_t>() : method.train_context;
  try {
    fmt::print("{}", attention::inspect_method(method, parse_distances(distances), T));
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  return kExitOk;
}

}  // namespace harness::cli
