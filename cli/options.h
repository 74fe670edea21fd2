// Shared command-line plumbing: Boost.Program_options parsing that turns usage errors into
// harness::InputError, and `--set key=value` config overrides.
#pragma once

#include <boost/program_options.hpp>

#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "harness/config/overrides.h"
#include "harness/config/schema.h"

namespace harness::cli {

namespace po = boost::program_options;

// Parses `args` against `options` and the positional `arguments` (each named in `positional`, in
// order; left out of the --help listing, which the usage line describes); returns false when
// --help was printed. A missing required argument is named by its description, not by the
// internal option name ("missing ACTION: keys | show", not "the option '--action' is required").
bool parse(const std::string& usage, const Args& args, po::options_description& options,
           po::variables_map& vm, const po::positional_options_description* positional = nullptr,
           const po::options_description* arguments = nullptr);

// The items of a comma-separated list option, in order, over every time it was given (the
// options declared composing, as --rows and --contexts, may be repeated); empty items dropped.
std::vector<std::string> split_commas(const std::vector<std::string>& items);

// config::load_run_config_with_overrides, then a note on stderr for each override the run does not read.
config::LoadedConfig load_config_with_overrides(const std::string& path,
                                                const std::vector<std::string>& overrides);

// Prints a note to stderr for each key set on the command line (`what`: key → "--set key=v" or
// "--tau 10") that the resolved config does not read (τ of a RoPE run, ...): it is ignored and
// not part of the run id, which a user who typed it should hear.
void note_unread_keys(const config::RunConfig& config, const std::map<std::string, std::string>& what);

// `--nproc N`: checks what the ranks would refuse (a batch N does not divide) once, then runs this
// executable with `rank_args` as N local ranks (harness/distributed/launcher.h); returns its exit code.
int launch_ranks(const config::LoadedConfig& loaded, const std::vector<std::string>& rank_args, int nproc);

}  // namespace harness::cli
