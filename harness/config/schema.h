// The config schema: every key a run config may hold, as data. One table drives loading and
// validation (with file:line:column errors and did-you-mean), the canonical form and run hash,
// sweep overrides, and `harness config keys`.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/config/key_table.h"
#include "harness/config/run_config.h"

namespace harness::config {

// A run config's keys: the key table (key_table.h) over RunConfig.
using KeySpec = KeySpecOf<RunConfig>;

// Throws InputError "file:line:column: key: what", the form of every config error.
[[noreturn]] void fail_at(const Location& at, const std::string& key, const std::string& what);
// Run and sweep names name a results directory (<run.out_dir>/<name>/): one path component of
// letters, digits, '.', '_' and '-' that starts with a letter or digit (so no '/', '..', NUL or
// leading '-'), of at most 255 characters (NAME_MAX). kNameRule says so in error messages.
inline constexpr size_t kMaxNameLength = 255;
bool is_valid_name(const std::string& name);
// What a run config's `name` may hold: such a name, or <sweep name>/<run id> (16 hex digits), the
// name a sweep gives each of its runs (and which their stored configs carry).
bool is_valid_run_name(const std::string& name);
inline constexpr const char* kNameRule =
    "a name of letters, digits, '.', '_' or '-' starting with a letter or digit, at most 255 characters "
    "(it names the results directory)";

// How a YAML value reads in an error message: 'text', a list, a mapping, or nothing.
std::string describe(const YAML::Node& node);
// A value as an error message quotes it: 'value', or its first 64 characters, '…' and its length
// (a megabyte scalar must not become a megabyte message).
std::string quoted(const std::string& value);

// A value written absolutely ("0.16", "1024") or relative to the training context ("L/400",
// "16L", "0.25*L"); fails at `at` with `expected` otherwise.
ContextValue parse_context_value(const YAML::Node& node, const Location& at, const std::string& key,
                                 const std::string& expected);

const std::vector<KeySpec>& schema();
const KeySpec* find_key(const std::string& path);

// The schema's key paths, in its order.
const std::vector<std::string>& schema_paths();
// Whether `prefix` names a section of keys ("attention" for attention.tau, ...).
bool is_section(const std::string& prefix);
// Closest valid key paths to `path` (edit distance), best first; empty when nothing is close.
std::vector<std::string> did_you_mean(const std::string& path);

// A config plus where each key was set (for errors found after loading).
struct LoadedConfig {
  RunConfig config;
  std::string source;                       // file the config came from
  std::string text;                         // its YAML text as written
  std::map<std::string, Location> where;    // key path -> where it was set
  Location location_of(const std::string& key) const;
};

// Parse a YAML document into `loaded` on top of its current values. Throws InputError naming
// file:line:column and the key on any unknown key, wrong type or out-of-range value.
void apply_yaml(LoadedConfig& loaded, const YAML::Node& root, const std::string& source);
// One dotted-key override (sweeps): `attention.tau` ← node.
void apply_override(LoadedConfig& loaded, const std::string& key, const YAML::Node& value,
                    const Location& at);
// Cross-key checks (sizes, contexts, the attention method) and derived defaults (head_dim);
// errors point at the key's location. Loaders call it; sweeps call it after overrides.
void resolve_and_validate(LoadedConfig& loaded);

// `name` (when non-empty) is the run name unless the YAML sets one.
LoadedConfig load_run_config_text(const std::string& yaml_text, const std::string& source,
                                  const std::string& name = "");
LoadedConfig load_run_config(const std::string& path);  // name defaults to the file's stem

// All keys in schema order as a flat "key: value" YAML, relative values resolved.
// results_only: only the run's identity: the keys that change results and that the run reads.
// Otherwise every key, those the run does not read marked with a comment.
std::string canonical_text(const RunConfig& config, bool results_only);
// The run id: 16 hex digits (FNV-1a 64 of the results-only canonical text): equal configs, equal
// ids, on any machine and whatever the key order in the file.
std::string config_hash(const RunConfig& config);
// The id the same config had before unread keys left the identity (every results key, read or
// not): how results written then are found (sweeps/README.md, "Run ids").
std::string legacy_config_hash(const RunConfig& config);

std::string schema_reference();  // `harness config keys`

}  // namespace harness::config
