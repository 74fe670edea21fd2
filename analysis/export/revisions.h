// `harness export revisions`: what made a set of runs, as their run.h5 files record it — the
// revision each was trained at (/config git_revision) and their training time (/train/seconds) —
// for a results page's provenance (scripts/results-lib.sh), with no second reader of run.h5.
#pragma once

#include <string>
#include <vector>

#include "analysis/run_set.h"

namespace analysis {

// The short revisions the runs with a readable run.h5 were trained at, with counts, sorted by
// revision: "0253b75 (62 runs), 81522d8-dirty (16 runs)" (the first 7 characters, and "-dirty"
// when the revision ends so; "unknown" for a file without one); "none" without a readable run.
std::string trained_revisions(const std::vector<RunSet>& sets);

// The runs' training time: the sum of each readable run's last /train/seconds, in seconds.
double training_seconds(const std::vector<RunSet>& sets);

}  // namespace analysis
