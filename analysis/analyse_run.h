// `harness analyse`: the attention statistics of a finished run's final model at any context
// (default: its validation contexts), with the raw-score Gaussianity of Appendix J, written into
// its run.h5 under /analysis/<T>/attention (atomically, under the run's lock), with the validation
// loss, its standard error over windows and every window's loss. A context already
// analysed at the same settings (windows, queries, validation seed, checkpoint step) is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/config/run_config.h"

namespace analysis {

struct AnalyseOptions {
  std::vector<harness::config::ContextValue> contexts;  // empty: the run's validation contexts
  int64_t windows = 0;     // validation windows per context; 0: by tokens, or the run's own
  int64_t tokens = 0;      // validation tokens per context (ceil(tokens / T) windows); 0: the run's
  int64_t queries = 0;     // sampled positions per window; 0: harness::train::statistics_queries' rule
  int64_t batch_size = 0;  // windows per forward pass; 0: the run's eval.batch_size
  bool force = false;      // recompute contexts already analysed at the same settings
};

struct AnalyseOutcome {
  std::string run_dir;
  std::vector<int64_t> analysed, skipped;  // contexts
  double seconds = 0;
};

// Throws harness::InputError, with nothing written, when the run is missing, unfinished or locked,
// or a context is impossible (outside [1, 2^20], or longer than every validation document).
AnalyseOutcome analyse_run(const std::string& run_dir, const AnalyseOptions& options,
                           const std::function<void(const std::string&)>& progress = {});

}  // namespace analysis
