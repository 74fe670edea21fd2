// `harness sweep table`: the final validation loss of each run of a sweep, by validation context:
// rows are runs (labelled by the keys the sweep varies) with their state, done or not, columns
// are contexts in tokens. Reads the runs' run.h5 files; formats an aligned text table or CSV.
// Mean ± s.e. over seeds is `export table`'s (export_table.h), the one builder of Table 1.
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
  std::string run_id;
  std::vector<std::string> labels;
  std::string state;                   // done | running | failed | interrupted | pending | unreadable
  std::map<int64_t, double> loss;      // final validation loss by context (done runs only)
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

// Aligned columns; the lowest loss of each context column is marked with '*'.
std::string format_text(const LossTable& table);
// Header: run_id, the labels, state, then loss_<T>.
std::string format_csv(const LossTable& table);

}  // namespace analysis
