// `harness report SWEEP_FILE|RUNS_DIR [--out FILE]`: argument parsing only; the page is
// analysis/report.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/report.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/errors.h"

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness report SWEEP_FILE|RUNS_DIR [--out FILE] [--theory FILE]\n"
    "  One self-contained HTML page of the runs, to open from a file and share: the results table\n"
    "  (mean ± standard error over seeds, as `export table`), every figure of `export curves`\n"
    "  (inline SVG), each run's state, the config keys that differ between runs, and provenance.\n"
    "  Default FILE: <the runs' directory>/report.html; the figures' CSV, gnuplot and image files\n"
    "  go beside it in <FILE without .html>-figures/ (docs/report.md).\n"
    "examples:\n"
    "  harness report sweeps/quickstart.yaml              # → runs/quickstart/report.html\n"
    "  harness report runs/quickstart --out /tmp/quickstart.html\n"
    "  harness report sweeps/quickstart.yaml --theory runs/theory/entropy-quick.h5";

}  // namespace

int report_command(const Args& args) {
  po::options_description options("report options");
  std::string input;
  analysis::ReportOptions o;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input)->required(), "a sweep file or a directory of runs");
  options.add_options()
      ("out", po::value(&o.out), "the page to write (default: <runs' directory>/report.html)")
      ("theory", po::value(&o.theory), "a `harness theory entropy` file to overlay on the figures (as export curves)");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  o.command = fmt::format("harness report {}", fmt::join(args, " "));
  const auto result = analysis::write_report(input, o);
  for (const auto& note : result.notes) fmt::print(stderr, "note: {}\n", note);
  fmt::print("report: {}\n", result.page);
  return kExitOk;
}

}  // namespace harness::cli
