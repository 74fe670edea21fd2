#include "harness/config/yaml_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "common/errors.h"

namespace harness::config {

void fail_at(const Location& at, const std::string& key, const std::string& what) {
  throw InputError(fmt::format("{}: {}: {}", at.str(), key, what));
}

std::string quoted(const std::string& value) {
  constexpr size_t kShown = 64;
  if (value.size() <= kShown) return fmt::format("'{}'", value);
  size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
  return fmt::format("'{}…' ({} characters)", value.substr(0, cut), value.size());
}

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return quoted(node.Scalar());
  if (node.IsSequence()) return "a list";
  return "a mapping";
}

std::string Location::str() const {
  if (line <= 0) return source;
  return fmt::format("{}:{}:{}", source, line, column);
}

Location Location::of(const std::string& source, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return {source, 0, 0};
  return {source, m.line + 1, m.column + 1};
}

namespace {

[[noreturn]] void fail(const Location& at, const std::string& key, const std::string& what) {
  fail_at(at, key, what);
}

}  // namespace

std::string format_double(double v) { return fmt::format("{}", v); }

// ---- scalar parsers: each returns the value or fails with the key's expectation ----

const YAML::Node& require_scalar(const YAML::Node& n, const Location& at, const std::string& key,
                                 const std::string& expected) {
  if (!n.IsScalar()) fail(at, key, fmt::format("expected {}, got {}", expected, describe(n)));
  return n;
}

namespace {

// Longer than any number or context value (libstdc++'s std::regex recurses once per character:
// a scalar of ~40 000 digits overflowed the stack). Longer scalars fail before the regex.
constexpr size_t kMaxNumberLength = 256;

void require_short(const std::string& s, const Location& at, const std::string& key,
                   const std::string& expected) {
  if (s.size() > kMaxNumberLength)
    fail(at, key, fmt::format("expected {}, got '{}…' ({} characters)", expected, s.substr(0, 32), s.size()));
}

}  // namespace

int64_t parse_int(const YAML::Node& n, const Location& at, const std::string& key,
                  const std::string& expected) {
  require_scalar(n, at, key, expected);
  const std::string& s = n.Scalar();
  require_short(s, at, key, expected);
  static const std::regex int_re(R"(^[+-]?[0-9]+$)");
  if (!std::regex_match(s, int_re)) fail(at, key, fmt::format("expected {}, got '{}'", expected, s));
  try {
    return std::stoll(s);
  } catch (const std::exception&) {
    fail(at, key, fmt::format("expected {}, got '{}' (out of range)", expected, s));
  }
}

// A decimal literal already checked by a regex; an overflow (1e400) is the user's error, located.
static double to_double(const std::string& s, const Location& at, const std::string& key,
                 const std::string& expected) {
  errno = 0;
  const double v = std::strtod(s.c_str(), nullptr);
  if (errno == ERANGE && std::isinf(v))
    fail(at, key, fmt::format("expected {}, got '{}' (out of range)", expected, s));
  return v;
}

double parse_double(const YAML::Node& n, const Location& at, const std::string& key,
                    const std::string& expected) {
  require_scalar(n, at, key, expected);
  const std::string& s = n.Scalar();
  require_short(s, at, key, expected);
  static const std::regex num_re(R"(^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$)");
  if (!std::regex_match(s, num_re)) fail(at, key, fmt::format("expected {}, got '{}'", expected, s));
  return to_double(s, at, key, expected);
}

// "0.16" | "L" | "4L" | "4*L" | "0.25 L" | "L/400" | "2L/3"
ContextValue parse_context_value(const YAML::Node& n, const Location& at, const std::string& key,
                                 const std::string& expected) {
  require_scalar(n, at, key, expected);
  static const std::regex rel_re(
      R"(^\s*([0-9]+\.?[0-9]*|\.[0-9]+)?\s*\*?\s*L\s*(/\s*([0-9]+\.?[0-9]*|\.[0-9]+))?\s*$)");
  std::smatch m;
  const std::string s = n.Scalar();
  require_short(s, at, key, expected);
  if (std::regex_match(s, m, rel_re)) {
    double coefficient = m[1].matched ? to_double(m[1].str(), at, key, expected) : 1.0;
    if (m[3].matched) {
      const double divisor = to_double(m[3].str(), at, key, expected);
      if (divisor == 0) fail(at, key, fmt::format("division by zero in '{}'", s));
      coefficient /= divisor;
    }
    return ContextValue::times_l(coefficient);
  }
  return ContextValue::absolute(parse_double(n, at, key, expected));
}

}  // namespace harness::config
