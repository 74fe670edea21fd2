// One home for reading YAML values with their place in the file: the scalar parsers every config
// file uses (run configs and sweeps through the key table, the critical-scaling file), each failing
// with "file:line:column: key: expected …, got …". Location, fail_at, describe and
// parse_context_value are declared in schema.h and defined with these.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "harness/config/schema.h"

namespace harness::config {

// The node when it is a scalar; fails at `at` with `expected` otherwise.
const YAML::Node& require_scalar(const YAML::Node& node, const Location& at, const std::string& key,
                                 const std::string& expected);
// A whole number written as one ("12", "-3"; not "1.0" or "1e3").
int64_t parse_int(const YAML::Node& node, const Location& at, const std::string& key, const std::string& expected);
// A decimal number ("0.5", "1e-3", ".5"); an overflow (1e400) fails, located.
double parse_double(const YAML::Node& node, const Location& at, const std::string& key,
                    const std::string& expected);
// The shortest text that reads back as `v` ("0.1", "1e-05").
std::string format_double(double v);

}  // namespace harness::config
