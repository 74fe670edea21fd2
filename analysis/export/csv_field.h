// One CSV field as RFC 4180 writes it: quoted (with quotes doubled) only when it holds a comma,
// a quote or a newline. Every CSV the harness writes goes through it.
#pragma once

#include <string>

namespace analysis {

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace analysis
