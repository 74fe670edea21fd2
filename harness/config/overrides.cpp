#include "harness/config/overrides.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/errors.h"

namespace harness::config {

LoadedConfig load_run_config_with_overrides(const std::string& path, const std::vector<std::string>& overrides) {
  LoadedConfig loaded = load_run_config(path);
  if (overrides.empty()) return loaded;
  for (const auto& item : overrides) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(fmt::format("--set {}: expected key=value, e.g. --set attention.tau=L/400", item));
    const Location at{"--set " + item, 0, 0};
    YAML::Node value;
    try {
      value = YAML::Load(item.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      throw InputError(fmt::format("{}: cannot parse the value: {}", at.str(), e.msg));
    }
    apply_override(loaded, item.substr(0, eq), value, at);
  }
  loaded.text += "\n# command-line overrides\n";
  for (const auto& item : overrides) loaded.text += fmt::format("# --set {}\n", item);
  resolve_and_validate(loaded);
  return loaded;
}

std::vector<std::string> unread_key_notes(const RunConfig& config, const std::map<std::string, std::string>& given) {
  std::vector<std::string> notes;
  for (const auto& [key, as_typed] : given)
    if (const auto* spec = find_key(key); spec && !spec->is_read(config))
      notes.push_back(fmt::format("{}: ignored: a run with this config does not read {} (not part of its id)",
                                  as_typed, key));
  return notes;
}

std::map<std::string, std::string> override_keys(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> keys;
  for (const auto& item : overrides) keys[item.substr(0, item.find('='))] = "--set " + item;
  return keys;
}

}  // namespace harness::config
