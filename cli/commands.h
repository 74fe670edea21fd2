// The harness subcommands. Each group parses its own arguments (Boost.Program_options) and
// returns a process exit code (common/errors.h).
#pragma once

#include <string>
#include <vector>

namespace harness::cli {

using Args = std::vector<std::string>;  // arguments after the command name

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args);
};

const std::vector<Command>& commands();

int train_command(const Args& args);
int config_command(const Args& args);
int attention_command(const Args& args);
int sweep_command(const Args& args);
int analyse_command(const Args& args);
int export_command(const Args& args);
int report_command(const Args& args);
int theory_command(const Args& args);
int theory_entropy_command(const Args& args);
int tau_command(const Args& args);

}  // namespace harness::cli
