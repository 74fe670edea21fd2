// The final validation loss of each run of a sweep, by validation context: rows are runs
// (labelled by the keys the sweep varies), columns are contexts in tokens. Reads the runs'
// run.h5 files; formats an aligned text table or CSV.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace analysis {

struct LossTableInput {
  std::string run_id;
  std::vector<std::string> labels;  // one per label name
  std::string run_file;             // <run dir>/run.h5 (may not exist yet)
};

struct LossTableRow {
  std::string run_id;                  // "" for a row averaged over seeds
  std::vector<std::string> labels;
  std::string state;                   // done | running | failed | interrupted | pending | mixed
  int runs = 1;                        // runs averaged into this row
  std::map<int64_t, double> loss;      // final validation loss by context (done runs only)
  std::map<int64_t, double> loss_se;   // standard error of the mean over the averaged runs (sd/√n; NaN for one)
};

struct LossTable {
  std::vector<std::string> label_names;  // e.g. attention.method, attention.tau
  std::vector<int64_t> contexts;         // every context any run validated at, ascending
  std::vector<LossTableRow> rows;
};

// Runs without a run.h5 are "pending"; only done runs get losses (the loss at their last
// validation, i.e. after the final step).
LossTable build_loss_table(const std::vector<std::string>& label_names,
                           const std::vector<LossTableInput>& runs);

// Rows that differ only in `label` (e.g. train.seed) merged: mean and standard deviation over the
// done runs; the label's column is dropped.
LossTable average_over(const LossTable& table, const std::string& label);

// Aligned columns; the lowest loss of each context column is marked with '*'.
std::string format_text(const LossTable& table);
// Header: run_id, the labels, state, runs, then loss_<T> (and loss_se_<T> when averaged).
std::string format_csv(const LossTable& table);

}  // namespace analysis
