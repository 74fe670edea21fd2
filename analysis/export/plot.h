// Figures as data first: every figure is a CSV (header row, one column per quantity) and a
// gnuplot script beside it that draws the CSV to SVG and PNG. gnuplot (Debian gnuplot-nox) does
// the drawing; without it the CSV and the script are still written and the caller gets a notice.
#pragma once

#include <string>
#include <vector>

namespace analysis {

// A table of numbers with named columns; NaN is written as an empty field (gnuplot skips it).
struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<double>> rows;
  // Optional text columns written before the numeric ones (e.g. a method name per row).
  std::vector<std::string> text_header;
  std::vector<std::vector<std::string>> text_rows;  // one per row when text_header is not empty
};

// Writes `csv` to `path` atomically (temporary file + rename). Throws std::runtime_error.
void write_csv(const std::string& path, const Csv& csv);

// Quotes a string for a gnuplot script ('...' with ' doubled).
std::string gnuplot_quote(const std::string& text);

struct RenderResult {
  std::string script;        // <dir>/<stem>.gp
  std::vector<std::string> images;  // <dir>/<stem>.svg, <dir>/<stem>.png when rendered
  std::string notice;        // why nothing was rendered ("" when rendered)
  bool failed = false;       // gnuplot ran and failed, or left an image incomplete (a full disk)
};

// Writes <dir>/<stem>.gp: terminal settings for SVG and PNG around `body` (gnuplot commands that
// set labels and axes and end in one `plot` or `splot`, reading its data from files named
// relative to `dir`), then runs gnuplot in `dir` when it is installed.
RenderResult render_gnuplot(const std::string& dir, const std::string& stem,
                            const std::string& body);

// Whether a gnuplot executable is on PATH (HARNESS_GNUPLOT overrides the name; tests set it to a
// missing program to check the no-gnuplot path).
bool gnuplot_available();

}  // namespace analysis
