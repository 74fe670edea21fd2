#include "analysis/export/csv_read.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/errors.h"

namespace analysis {

using harness::InputError;

bool CsvFile::has(const std::string& name) const {
  for (const auto& h : header)
    if (h == name) return true;
  return false;
}

size_t CsvFile::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  std::string known;
  for (const auto& h : header) known += (known.empty() ? "" : ", ") + h;
  throw InputError(fmt::format("{}: no column '{}' (its columns: {})", path, name, known));
}

double CsvFile::number(size_t r, size_t c, bool empty_is_nan) const {
  const std::string& s = rows.at(r).at(c);
  if (s.empty() && empty_is_nan) return std::nan("");
  char* end = nullptr;
  errno = 0;
  const double x = s.empty() ? 0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
    throw InputError(fmt::format("{}:{}: column '{}': expected a number, got '{}'", path, lines.at(r), header.at(c), s));
  return x;
}

CsvFile parse_csv(const std::string& text, const std::string& path) {
  CsvFile csv;
  csv.path = path;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, row_line = 1;
  auto end_row = [&] {
    fields.push_back(field);
    field.clear();
    if (csv.header.empty()) {
      csv.header = fields;
    } else {
      if (fields.size() != csv.header.size())
        throw InputError(fmt::format("{}:{}: {} fields, the header has {}", path, row_line, fields.size(),
                                     csv.header.size()));
      csv.rows.push_back(fields);
      csv.lines.push_back(row_line);
    }
    fields.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (ch == '"') quoted = false;
      else field += ch, line += ch == '\n';
      continue;
    }
    if (ch == '"') quoted = true, any = true;
    else if (ch == ',') fields.push_back(field), field.clear(), any = true;
    else if (ch == '\n') end_row(), row_line = ++line;
    else if (ch != '\r') field += ch, any = true;
  }
  if (quoted) throw InputError(fmt::format("{}:{}: a quoted field is not closed", path, row_line));
  if (any || !field.empty()) end_row();
  if (csv.header.empty()) throw InputError(fmt::format("{}: empty: no header", path));
  return csv;
}

CsvFile read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_csv(text.str(), path);
}

}  // namespace analysis
