// Shared command-line plumbing: Boost.Program_options parsing that turns usage errors into
// harness::InputError, and `--set key=value` config overrides.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "harness/config/schema.h"

namespace harness::cli {

namespace po = boost::program_options;

// Parses `args` against `options` (+ positional); returns false when --help was printed.
bool parse(const std::string& usage, const Args& args, po::options_description& options,
           po::variables_map& vm, const po::positional_options_description* positional = nullptr);

// Loads a run config and applies each "key=value" override (value parsed as YAML).
config::LoadedConfig load_config_with_overrides(const std::string& path,
                                                const std::vector<std::string>& overrides);

// `--nproc N`: checks what the ranks would refuse (a batch N does not divide) once, then runs this
// executable with `rank_args` as N local ranks (harness/dist/launcher.h); returns its exit code.
int launch_ranks(const config::LoadedConfig& loaded, const std::vector<std::string>& rank_args, int nproc);

}  // namespace harness::cli
