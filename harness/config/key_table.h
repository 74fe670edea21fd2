// One validator for every config file: a table of keys — dotted paths, what each expects, its help
// and default — over a config struct, walked over a YAML document with one error form:
//
//   file:line:column: unknown key 'a.b' — did you mean 'a.c'?; valid keys in 'a': c, d
//   file:line:column: key: expected …, got …
//
// and listed by one reference (`harness config keys`). A run config (schema.h: KeySpec =
// KeySpecOf<RunConfig>) and the critical-scaling file (analysis/theory/critical_scaling_config.h)
// are two tables of it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace harness::config {

// Where a value came from, for error messages.
struct Location {
  std::string source;  // file path (or "<string>")
  int line = 0;        // 1-based; 0 if unknown
  int column = 0;
  std::string str() const;  // "file:line:column"
  static Location of(const std::string& source, const YAML::Node& node);
};

template <class Config>
struct KeySpecOf {
  std::string path;           // "model.d_model"
  std::string expected;       // "an integer in [1, 65536]", "one of: rope, alibi, ..."
  std::string help;
  bool affects_results = true;  // part of the canonical form / run id (run configs)
  std::function<void(Config&, const YAML::Node&, const Location&)> set;  // parse + check
  std::function<std::string(const Config&)> get;  // canonical text of the resolved value
  // Whether a run with this config reads the key (unset: always). A key the run does not read
  // (τ without the scale-invariant transform, p-RoPE keys without p-RoPE, ...) is left out of its
  // identity, so runs that differ only in such keys are one run, and tables show "–" for it.
  // A key added later must be unread at the value that reproduces the earlier behaviour, so that
  // adding it leaves existing run ids as they are.
  std::function<bool(const Config&)> read;
  bool is_read(const Config& c) const { return !read || read(c); }
};

// A key's description; the builder that calls it gives it its setter and getter.
template <class Config>
KeySpecOf<Config> key_of(std::string path, std::string expected, std::string help, bool affects_results = true) {
  KeySpecOf<Config> k;
  k.path = std::move(path);
  k.expected = std::move(expected);
  k.help = std::move(help);
  k.affects_results = affects_results;
  return k;
}

// ---- the walk, over the table's key paths ----

// Whether `prefix` names a section of `paths` ("attention" for attention.tau, ...).
bool is_section(const std::vector<std::string>& paths, const std::string& prefix);
// Throws InputError "at: unknown key 'path' — did you mean '…'?; valid keys in 'section': …".
[[noreturn]] void unknown_key(const std::vector<std::string>& paths, const Location& at,
                              const std::string& path);
// Walks the mapping `map` (keys below `prefix`) against `paths`: keys must be plain, unique names
// of the table; a section recurses. A path that is both a key and a section ("rho" and
// "rho.from") takes a value (set) or a mapping of its section's keys. `set` receives every key
// path with its value node.
void walk_mapping(const std::vector<std::string>& paths, const YAML::Node& map, const std::string& prefix,
                  const std::string& source,
                  const std::function<void(const std::string& path, const YAML::Node& value)>& set);
// The YAML document of `text`; a syntax error is "source:line:column: YAML syntax error: …".
YAML::Node parse_yaml(const std::string& text, const std::string& source);
// One row of `harness config keys`.
std::string reference_row(const std::string& path, const std::string& help, const std::string& notes,
                          const std::string& expected, const std::string& default_text);

template <class Config>
std::vector<std::string> key_paths(const std::vector<KeySpecOf<Config>>& table) {
  std::vector<std::string> paths;
  for (const auto& k : table) paths.push_back(k.path);
  return paths;
}

// Sets `config` from the mapping `root` by the table's setters; `where` receives each key's place.
template <class Config>
void apply_keys(const std::vector<KeySpecOf<Config>>& table, const std::vector<std::string>& paths,
                Config& config, const YAML::Node& root, const std::string& source,
                std::map<std::string, Location>& where) {
  walk_mapping(paths, root, "", source, [&](const std::string& path, const YAML::Node& value) {
    for (const auto& k : table)
      if (k.path == path) {
        const Location at = Location::of(source, value);
        k.set(config, value, at);
        where[path] = at;
        return;
      }
  });
}

// The table as `harness config keys` lists it: each key, its help, what it expects, its default.
template <class Config>
std::string key_reference(const std::vector<KeySpecOf<Config>>& table, const Config& defaults,
                          const std::function<std::string(const KeySpecOf<Config>&)>& notes = {}) {
  std::string out;
  for (const auto& k : table)
    out += reference_row(k.path, k.help, notes ? notes(k) : "", k.expected, k.get(defaults));
  return out;
}

}  // namespace harness::config
