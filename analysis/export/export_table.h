// `harness export table`: any scalar the run files hold, as mean ± standard error over seeds, in
// rows and columns chosen among the keys that vary and the context; Markdown, CSV or LaTeX. The
// paper's Table 1 (methods × 1L/4L/16L) is the default layout of a sweep over methods.
//
// Metrics (docs/export.md):
//   loss                        final validation loss at each context (/eval/<T>/loss, last row)
//   attention/<name>[@t[xΔ]]    a validation attention statistic at the last validation, mean over
//                               layers and heads; @t picks the band starting at distance t, @txΔ
//                               the range [t, tΔ)  (entropy, recent_mass, band_mass@10, ...)
//   analysis/<name>[@…]         the same from `harness analyse` (/analysis/<T>/attention), also
//                               loss and the raw-score moments (score_std, score_excess_kurtosis)
//   needle/<name>               task: needle: accuracy, city_accuracy, number_accuracy at each
//                               needle context (/needle/<T>/…): the paper's Table 2

#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/run_set.h"
#include "results/run_file.h"

namespace analysis {

struct MetricSpec {
  std::string text;              // as given
  std::string source;            // "eval" | "analysis" | "needle"
  std::string name;              // "loss", "entropy", "band_mass", ...
  int64_t at = -1, ratio = -1;   // band start (ratio < 0) or range [at, at·ratio); −1: none
};
// Throws harness::InputError listing the accepted forms.
MetricSpec parse_metric(const std::string& text);

// The contexts a record has the metric at, and its value there (nullopt when absent).
std::vector<int64_t> metric_contexts(const results::RunRecord& record, const MetricSpec& metric);
std::optional<double> metric_value(const results::RunRecord& record, const MetricSpec& metric,
                                   int64_t context);
// A loss's standard error over validation windows (loss and analysis/loss), nullopt otherwise or
// when the file predates it.
std::optional<double> metric_window_se(const results::RunRecord& record, const MetricSpec& metric,
                                       int64_t context);
// Each validation window's loss, in window order (loss: the last validation's; analysis/loss),
// and the fingerprint of those windows; empty for other metrics or when the file predates them.
struct WindowLosses {
  std::vector<double> loss;
  std::string fingerprint;  // harness/data/windows.h: equal fingerprints, the same windows
};
WindowLosses metric_window_losses(const results::RunRecord& record, const MetricSpec& metric, int64_t context);

struct TableOptions {
  std::string metric = "loss";
  std::vector<std::string> rows;  // keys (or "context"); empty: every varying key but the seed
  std::vector<std::string> cols;  // empty: {"context"}
  std::string best;               // min | max | none; "": min for loss, max for needle, else none
  bool window_se = false;         // show each loss cell's standard error over validation windows
};

struct Cell {
  double mean = 0, se = 0;  // se: sample sd / √n over the seeds (NaN when n = 1)
  int n = 0;                // seeds (runs) averaged
  double window_se = 0;     // loss metrics: the runs' mean standard error over validation windows
                            // (NaN when unknown)
  WindowLosses windows;  // loss metrics, one run: each validation window's loss and the windows'
                         // fingerprint (empty with two runs or more, or when the run file lacks them)
};

struct Table {
  std::string title;
  std::vector<std::string> row_keys, col_keys;
  std::vector<std::vector<std::string>> rows, cols;  // label values per row / column
  std::vector<std::string> col_names;                // one header per column
  std::vector<std::vector<std::optional<Cell>>> cells;  // [row][col]
  std::vector<std::vector<bool>> best;                  // [row][col]
  std::vector<std::string> missing;   // one line per run that is not done
  std::vector<std::string> warnings;  // unreadable files
  bool window_se = false;             // cells show window_se (TableOptions::window_se)
};

// Throws harness::InputError for an unknown metric or key, or a varying key in neither rows
// nor cols (the seed excepted: it is what is averaged).
Table build_table(const RunSet& runs, const TableOptions& options);

// A cell as the Markdown and LaTeX tables show it: "1.2000 ± 0.1155 (3)", "1.3000 (1)" for one seed,
// "–" for none; `pm` is the plus-minus sign of the format ("±", "$\\pm$"); with `window_se`, the
// standard error over validation windows too. `harness report` shows the same text.
std::string cell_text(const std::optional<Cell>& cell, const char* pm, bool window_se);

// "md" | "csv" | "tex". CSV columns: the row keys, then for each column "<name> mean",
// "<name> se", "<name> n" (and "<name> window_se" with TableOptions::window_se).
std::string format_table(const Table& table, const std::string& format);

}  // namespace analysis
