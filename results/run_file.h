// A run's results: an in-memory record, published as one HDF5 file (results/<run>/run.h5).
//
// Layout (plain datasets, readable with h5py without this code):
//   /                 attrs: format_version
//   /config           attrs: yaml (as written), canonical (resolved keys), hash, git_revision,
//                            libtorch_version, blas, threads, device, name; integers world_size,
//                            micro_batch_size, threads_resumed_with (data parallel: how it ran)
//   /status           attrs: state (running | done | failed | interrupted), reason, step
//   /train/{step, tokens, loss, lr, grad_norm, seconds}            (N,)  one row per step
//   /eval/<T>/{step, loss, loss_se, windows}                        (E,)  T = context in tokens
//   /eval/<T>/window_loss      each window's loss at the last validation (windows,); the group's
//                             attribute window_fingerprint names those windows
//   /eval/<T>/window_document  each of those windows' document, numbered 0, 1, … (windows,)
//   /eval/<T>/position_loss                                         (E, buckets)
//   /eval/<T>/score_std                                             (E, layers)
//   /eval/<T>/attention/…     attention statistics at each validation (E, layers, heads[, bands])
//   /needle/<T>/…             task: needle: retrieval at context T (accuracy, per-example arrays)
//   /analysis/<T>/attention/… `harness analyse`: the same statistics (layers, heads[, …]) and the
//                             raw-score Gaussianity, for the final model; loss, loss_se (1,) and
//                             window_loss (windows,): the final model's validation loss
// Every dataset is chunked with unlimited max size; each has a `units` attribute. The statistics'
// datasets are listed in docs/results-format.md.
//
// Publishing writes a temporary file and renames it over run.h5, so a crash or kill at any moment
// leaves the previous complete file: results already written are never corrupted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "results/dataset_group.h"

namespace results {

struct TrainRows {
  std::vector<int64_t> step, tokens;
  std::vector<double> loss, lr, grad_norm, seconds;
  size_t size() const { return step.size(); }
};

struct EvalRows {
  std::vector<int64_t> step;
  std::vector<double> loss;                        // mean nats per token over the windows
  std::vector<double> loss_se;                     // its standard error over the windows (NaN: unknown,
                                                   // files written before it was stored)
  std::vector<int64_t> windows;                    // windows validated on (0: unknown, as above)
  // Each window's loss at the last validation (step.back()), in window order: two runs validated
  // on the same windows are compared window by window. Empty: files written before it was stored.
  std::vector<double> window_loss;
  std::string window_fingerprint;  // of those windows (harness/data/windows.h); "" with none
  std::vector<int64_t> window_document;  // each of those windows' document (0, 1, …); empty in
                                         // files written before 2026-12-07
  std::vector<std::vector<double>> position_loss;  // per bucket of positions within the window
  std::vector<std::vector<double>> score_std;      // per layer: std of raw scores s = scale·q·k
  DatasetGroup attention;  // attention statistics: arrays (E, layers, heads[, …]), or empty
  size_t size() const { return step.size(); }
};

enum class RunState { kRunning, kDone, kFailed, kInterrupted };
const char* to_string(RunState s);
RunState run_state_from_string(const std::string& s);  // throws std::invalid_argument

struct RunRecord {
  std::map<std::string, std::string> config;  // /config string attributes
  std::map<std::string, int64_t> config_ints;  // /config integer attributes besides threads
                                               // (world_size, micro_batch_size, threads_resumed_with)
  int64_t threads = 0;
  TrainRows train;
  std::map<int64_t, EvalRows> eval;            // by context length T
  std::map<int64_t, DatasetGroup> analysis;    // `harness analyse` of the final model, by T
  std::map<int64_t, DatasetGroup> needle;      // task: needle, retrieval by context T
  RunState state = RunState::kRunning;
  std::string reason;
  int64_t status_step = 0;

  // Forget every row logged after `step` (resuming from a checkpoint taken at `step`).
  void truncate_after(int64_t step);
};

// Atomically replaces `path` with the record (temporary file + fsync + rename).
void publish(const RunRecord& record, const std::string& path);
// Reads a run file written by publish (or any file of the same layout). Throws std::runtime_error.
RunRecord read_run_file(const std::string& path);

}  // namespace results
