// The runs of a sweep grouped into arms — one arm per value of the compared keys (a method, a τ),
// its runs the training seeds — with each run's per-window validation losses at each context:
// what seed-paired comparisons (seed_paired_gap.h) read. `tau check` and `export pairs` share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/run_set.h"
#include "analysis/seed_paired_gap.h"

namespace analysis {

struct Arm {
  std::string label;              // the compared keys' values, "k=v, …" for two keys or more
  std::vector<SeedWindows> runs;  // one per finished run, in the set's order
  const RunEntry* first = nullptr;  // the arm's first run (its config)
  double mean() const;            // mean_loss(runs)
};

// Mean over runs of each run's mean window loss.
double mean_loss(const std::vector<SeedWindows>& runs);

// Every arm at one validation context T, scored on the same windows.
struct ArmGrid {
  int64_t context = 0;
  std::vector<Arm> arms;          // in order of first appearance in the set
  std::vector<int64_t> document;  // each window's document
  bool documents_known = true;    // false: run files without /eval/<T>/window_document (each
                                  // window is then its own document)
};

// From the last validation of every finished run; arms by the values of `keys` (a key a run does
// not vary or read counts as ""). Throws harness::InputError when a run lacks per-window losses,
// the runs were not scored on the same windows at a context, or two runs of an arm share a seed
// (the keys do not tell them apart).
std::vector<ArmGrid> arm_grid(const RunSet& set, const std::vector<std::string>& keys);

// Keeps only the arms labelled `labels` (at least two; a planned comparison: its pairs are then
// the whole family Holm's procedure controls). InputError naming a label no grid holds, with the
// labels there are, said as coming from `source` ("--arm", or a sweep's planned block: an arm of
// a sweep still running may have no finished run yet).
void keep_arms(std::vector<ArmGrid>& grids, const std::vector<std::string>& labels,
               const std::string& source = "--arm");

// The runs of `a` and `b` whose seeds are in both, in each one's order: a partly finished sweep
// still compares its common seeds.
std::pair<std::vector<SeedWindows>, std::vector<SeedWindows>> common_seeds(const Arm& a, const Arm& b);

}  // namespace analysis
