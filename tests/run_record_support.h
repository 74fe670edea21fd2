// A run record's training log for the tests that write run files (results_test, the fuzz
// regressions): the columns every reader indexes by step.
#pragma once

#include <cstdint>
#include <string>

#include "results/run_file.h"

namespace test_support {

// A record of the config `yaml` (run id 0123456789abcdef) run on `threads` threads, with a training
// log of steps 1..steps of `tokens_per_step` tokens each: loss 5 − s/2, lr 1, grad norm s/10, s/4
// seconds. No validations, state or status: the test's own.
inline results::RunRecord record_with_train_log(const std::string& yaml, int threads, int steps,
                                                int64_t tokens_per_step) {
  results::RunRecord r;
  r.config["yaml"] = yaml;
  r.config["hash"] = "0123456789abcdef";
  r.threads = threads;
  for (int s = 1; s <= steps; ++s) {
    r.train.step.push_back(s);
    r.train.tokens.push_back(tokens_per_step * s);
    r.train.loss.push_back(5.0 - 0.5 * s);
    r.train.lr.push_back(1.0);
    r.train.grad_norm.push_back(0.1 * s);
    r.train.seconds.push_back(0.25 * s);
  }
  return r;
}

}  // namespace test_support
