#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "harness/config/schema.h"
#include "harness/util/errors.h"

namespace harness::cli {

int config_command(const Args& args) {
  const std::string usage =
      "usage: harness config keys                      every config key, its type and default\n"
      "       harness config show --config FILE [--set key=value]...\n"
      "                                                the resolved config and its run id";
  po::options_description options("config options");
  std::string action, config_path;
  std::vector<std::string> overrides;
  options.add_options()
      ("action", po::value(&action)->required(), "keys | show")
      ("config,c", po::value(&config_path), "run config (YAML)")
      ("set", po::value(&overrides)->composing(), "override a key (repeatable)");
  po::positional_options_description positional;
  positional.add("action", 1);
  po::variables_map vm;
  if (!parse(usage, args, options, vm, &positional)) return kExitOk;
  if (action == "keys") {
    fmt::print("{}", config::schema_reference());
    return kExitOk;
  }
  if (action == "show") {
    if (config_path.empty()) throw InputError("config show: --config FILE is required\n" + usage);
    const auto loaded = load_config_with_overrides(config_path, overrides);
    fmt::print("# run id {}\n{}", config::config_hash(loaded.config),
               config::canonical_text(loaded.config, false));
    return kExitOk;
  }
  throw InputError(fmt::format("config: unknown action '{}'; expected keys or show\n{}", action, usage));
}

}  // namespace harness::cli
