// A CSV the harness wrote (`export table|pairs --format csv`, figure CSVs), read back with its
// header: what pages rendered from committed data read (docs/results/). Quoting as csv_field.h
// writes it (RFC 4180). Every error names the file, and the line and column where there is one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace analysis {

struct CsvFile {
  std::string path;                            // for messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as the header
  std::vector<int> lines;                      // each row's line in the file (the header is line 1)

  bool has(const std::string& name) const;
  // The index of column `name`; throws harness::InputError naming the file and the column.
  size_t column(const std::string& name) const;
  // Row r's field in column c as a number ("nan" and "inf" as strtod reads them); an empty field
  // is NaN when `empty_is_nan`, else an error. Throws harness::InputError naming file, line, column.
  double number(size_t r, size_t c, bool empty_is_nan = false) const;
};

// Throws harness::InputError on an unterminated quote or a row whose field count differs from the
// header's.
CsvFile parse_csv(const std::string& text, const std::string& path);
// The same from a file; throws harness::InputError when it cannot be read or is empty.
CsvFile read_csv(const std::string& path);

}  // namespace analysis
