// A run config with command-line overrides (`--set key=value`): what `harness train`, `config show`,
// `tau check` and the benchmarks load. Each override's value is parsed as YAML and applied in
// order on top of the file, recorded in the config's text, then the whole is resolved and validated.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/config/schema.h"

namespace harness::config {

// Throws harness::InputError naming the override ("--set model.heads=x: ...").
LoadedConfig load_run_config_with_overrides(const std::string& path, const std::vector<std::string>& overrides);

// For each key given on the command line (`given`: key → as typed, "--set attention.tau=3" or
// "--tau 3") that a run with `config` does not read (τ of a RoPE run): a note saying it is ignored
// and not part of the run id, which a user who typed it should hear.
std::vector<std::string> unread_key_notes(const RunConfig& config, const std::map<std::string, std::string>& given);

// The keys of "key=value" overrides, each with the override as typed: the `given` of unread_key_notes.
std::map<std::string, std::string> override_keys(const std::vector<std::string>& overrides);

}  // namespace harness::config
