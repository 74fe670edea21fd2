// `harness report SWEEP_FILE|RUNS_DIR`: one self-contained static HTML page of a set of runs, to
// open from a file and share (docs/report.md). No server, no network, no external CSS, script or
// font: the figures are gnuplot's SVGs inline, their CSVs data: links. It holds
//   - the results table: `harness export table`'s (analysis/export/export_table.h), the same
//     cells (mean ± s.e. over seeds, number of seeds), the best per column in bold;
//   - every figure of `harness export curves` for runs (analysis/export/run_figures.h), rendered
//     by the same gnuplot scripts into a folder beside the page (<page>-figures/) and inlined;
//   - each run's state (done, running, failed, interrupted, pending, unreadable), step and reason;
//   - the config keys whose values differ between the runs, run by run (no other key);
//   - provenance: the runs' revision, LibTorch, BLAS, device, threads and config source (from
//     run.h5's /config), the sweep record, and the revision, date, CPU, GPUs and command of the
//     report itself.
// Every string that comes from the runs, the configs or the file system is escaped.
#pragma once

#include <string>
#include <vector>

#include "analysis/export/figure_writer.h"
#include "analysis/run_set.h"

namespace analysis {

struct ReportOptions {
  std::string out;      // the page; "" → <the runs' directory>/report.html
  std::string command;  // the command line that made it, shown under provenance ("" : none)
  std::string theory;   // a `harness theory entropy` file to overlay on the figures, as
                        // `export curves --theory` does ("" : none)
};

struct ReportResult {
  std::string page;                // the HTML file written
  std::string figures_dir;         // the figures' CSV, gnuplot, SVG and PNG files ("" : none drawn)
  std::vector<std::string> notes;  // figures not drawn, runs not done, unreadable files
};

// Where the page goes by default: <set.dir>/report.html.
std::string default_report_path(const RunSet& set);

// The page as text, for a loaded set; its figures are drawn into `figures_dir` (created), with
// `theory` overlaid.
std::string report_page(const RunSet& set, const TheoryGroups& theory, const std::string& figures_dir,
                        const ReportOptions& options, std::vector<std::string>& notes);

// Loads the runs of `input` and the theory file (analysis/run_set.h: a missing path, a directory
// without runs, a sweep file that does not load, a file that is no theory file:
// harness::InputError naming it, and nothing written), draws the figures and writes the page
// atomically (common/atomic_file.h).
ReportResult write_report(const std::string& input, const ReportOptions& options);

}  // namespace analysis
