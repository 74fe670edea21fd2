#include "harness/cli/commands.h"

namespace harness::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train one run from a config file (or resume it)", &train_command},
      {"config", "list config keys; show a resolved config and its run id", &config_command},
  };
  return table;
}

}  // namespace harness::cli
