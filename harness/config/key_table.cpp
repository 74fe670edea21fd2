// The walk of a YAML document over a key table (key_table.h): every config file's keys are checked
// here, with one error form.
#include "harness/config/key_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "common/did_you_mean.h"
#include "common/errors.h"
#include "harness/config/schema.h"

namespace harness::config {

bool is_section(const std::vector<std::string>& paths, const std::string& prefix) {
  for (const auto& p : paths)
    if (p.size() > prefix.size() && p.compare(0, prefix.size(), prefix) == 0 && p[prefix.size()] == '.')
      return true;
  return false;
}

void unknown_key(const std::vector<std::string>& paths, const Location& at, const std::string& path) {
  std::string msg = fmt::format("{}: unknown key '{}'", at.str(), path);
  const auto close = harness::did_you_mean(path, paths);
  if (!close.empty()) msg += fmt::format(" — did you mean '{}'?", close.front());
  // List the valid keys of the section the user was in (or the sections at the top).
  const auto dot = path.rfind('.');
  const std::string section = dot == std::string::npos ? "" : path.substr(0, dot + 1);
  std::vector<std::string> siblings;
  std::set<std::string> seen;
  for (const auto& p : paths) {
    if (p.compare(0, section.size(), section) != 0) continue;
    std::string rest = p.substr(section.size());
    rest = rest.substr(0, rest.find('.'));
    if (seen.insert(rest).second) siblings.push_back(rest);
  }
  if (siblings.empty())
    msg += fmt::format(" (no section '{}')", section.substr(0, section.size() - 1));
  else
    msg += fmt::format("; valid keys{}: {}",
                       section.empty() ? "" : fmt::format(" in '{}'", section.substr(0, section.size() - 1)),
                       fmt::join(siblings, ", "));
  throw InputError(msg);
}

void walk_mapping(const std::vector<std::string>& paths, const YAML::Node& map, const std::string& prefix,
                  const std::string& source,
                  const std::function<void(const std::string& path, const YAML::Node& value)>& set) {
  std::set<std::string> seen;
  for (const auto& kv : map) {
    const Location at = Location::of(source, kv.first);
    if (!kv.first.IsScalar()) throw InputError(fmt::format("{}: keys must be plain names", at.str()));
    const std::string name = kv.first.Scalar();
    const std::string path = prefix.empty() ? name : prefix + "." + name;
    if (!seen.insert(name).second) throw InputError(fmt::format("{}: duplicate key '{}'", at.str(), path));
    const bool key = std::find(paths.begin(), paths.end(), path) != paths.end();
    const bool section = is_section(paths, path);
    if (key && !(section && kv.second.IsMap())) {
      set(path, kv.second);
    } else if (section) {
      if (!kv.second.IsMap())
        throw InputError(fmt::format("{}: {}: expected a mapping (a section of keys), got {}",
                                     Location::of(source, kv.second).str(), path, describe(kv.second)));
      walk_mapping(paths, kv.second, path, source, set);
    } else {
      unknown_key(paths, at, path);
    }
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}:{}: YAML syntax error: {}", source, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
  }
}

std::string reference_row(const std::string& path, const std::string& help, const std::string& notes,
                          const std::string& expected, const std::string& default_text) {
  return fmt::format("{:<28} {}{}\n{:<28}   expected {}; default {}\n", path, help, notes, "", expected,
                     default_text);
}

}  // namespace harness::config
