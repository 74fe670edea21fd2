// The key builders every key table (key_table.h) shares: an integer in a range, a number in an
// interval, one of a few names. `Access` is a generic lambda returning a reference to the member
// of `Config` the key sets; each builder's setter parses with yaml_values.h and fails in the one
// form "file:line:column: key: expected …, got …".
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/config/key_table.h"
#include "harness/config/schema.h"
#include "harness/config/yaml_values.h"

namespace harness::config {

template <class Config, class Access>
KeySpecOf<Config> integer_key_of(std::string path, Access access, int64_t lo, int64_t hi, std::string help,
                                 bool affects_results = true) {
  KeySpecOf<Config> k =
      key_of<Config>(path, fmt::format("an integer in [{}, {}]", lo, hi), std::move(help), affects_results);
  k.set = [=](Config& c, const YAML::Node& n, const Location& at) {
    const int64_t v = parse_int(n, at, path, k.expected);
    if (v < lo || v > hi) fail_at(at, path, fmt::format("expected {}, got {}", k.expected, v));
    access(c) = static_cast<std::remove_reference_t<decltype(access(c))>>(v);
  };
  k.get = [=](const Config& c) { return fmt::format("{}", access(const_cast<Config&>(c))); };
  return k;
}

template <class Config, class Access>
KeySpecOf<Config> real_key_of(std::string path, Access access, double lo, double hi, bool lo_open,
                              std::string help, bool affects_results = true, bool hi_open = false) {
  KeySpecOf<Config> k = key_of<Config>(path,
                                       fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", format_double(lo),
                                                   format_double(hi), hi_open ? ")" : "]"),
                                       std::move(help), affects_results);
  k.set = [=](Config& c, const YAML::Node& n, const Location& at) {
    const double v = parse_double(n, at, path, k.expected);
    if (!(lo_open ? v > lo : v >= lo) || !(hi_open ? v < hi : v <= hi) || !std::isfinite(v))
      fail_at(at, path, fmt::format("expected {}, got {}", k.expected, n.Scalar()));
    access(c) = v;
  };
  k.get = [=](const Config& c) { return format_double(access(const_cast<Config&>(c))); };
  return k;
}

template <class Config, class Access>
KeySpecOf<Config> choice_key_of(std::string path, Access access,
                                std::function<std::vector<std::string>()> allowed, std::string help,
                                bool affects_results = true, bool allow_empty = false) {
  KeySpecOf<Config> k = key_of<Config>(path, fmt::format("one of: {}", fmt::join(allowed(), ", ")), std::move(help),
                                       affects_results);
  k.set = [=](Config& c, const YAML::Node& n, const Location& at) {
    if (allow_empty && n.IsNull()) {
      access(c).clear();
      return;
    }
    const auto names = allowed();
    const std::string expected = fmt::format("one of: {}", fmt::join(names, ", "));
    const std::string& s = require_scalar(n, at, path, expected).Scalar();
    if (allow_empty && s.empty()) {
      access(c).clear();
      return;
    }
    if (std::find(names.begin(), names.end(), s) == names.end())
      fail_at(at, path, fmt::format("{} is not valid; expected {}", quoted(s), expected));
    access(c) = s;
  };
  k.get = [=](const Config& c) {
    const std::string& s = access(const_cast<Config&>(c));
    return s.empty() ? std::string("''") : s;
  };
  return k;
}

}  // namespace harness::config
