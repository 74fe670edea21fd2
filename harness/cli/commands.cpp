#include "harness/cli/commands.h"

namespace harness::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train one run from a config file (or resume it)", &train_command},
  };
  return table;
}

}  // namespace harness::cli
