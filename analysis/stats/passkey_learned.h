// Passkey fine-tunes (needle.kind: passkey) as a share: how many seeds of each arm learned to copy
// the key, with an exact test between arms, and retrieval against the distance over the seeds that
// learned only (sweeps/passkey-one-schedule.yaml, issue #57 item 4).
//
// A fine-tune either learns to copy or stays on the plateau of a uniform guess (docs/results/
// passkey.md: exact match at the shortest distance 0 or ≥ 0.94 in all 24 runs, and the same split
// as the training key loss below 1 nat/digit), so a mean over seeds mixes two populations. Rule,
// fixed before the runs of passkey-one-schedule.yaml: a run **learned** when its exact-match
// accuracy at the shortest distance it was scored at (d = L/2: examples of L + 1 tokens, inside
// the training context) is at least kLearnedAccuracy.
//
// Per arm: seeds, seeds learned, the share with its 95% Clopper–Pearson interval. Per pair of arms:
// Fisher's exact test, two-sided, on [[learned_a, not_a], [learned_b, not_b]]; Holm's step-down
// over every pair of arms at family-wise error alpha (the family: all pairs of the arms present).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/stats/exact_tests.h"

namespace analysis {

struct RunSet;
struct RunEntry;
struct Writer;

constexpr double kLearnedAccuracy = 0.5;

struct PasskeyRun {
  std::string arm;
  int64_t seed = 0;
  int64_t train_context = 0;                 // L
  std::map<int64_t, double> accuracy;        // distance d (tokens) → exact match
};

// Whether `run` learned to copy (the rule above); false for a run scored at no distance.
bool learned_to_copy(const PasskeyRun& run);

struct PasskeyArm {
  std::string label;
  int seeds = 0, learned = 0;
  stats::Interval share_ci;  // 95% Clopper–Pearson
};

struct PasskeyPair {
  size_t a = 0, b = 0;     // indices into PasskeyLearned::arms
  double p = 1;            // Fisher's exact test, two-sided
  double threshold = 0;    // what p had to reach at its Holm rank
  bool resolved = false;   // rejected by Holm over every pair
};

struct PasskeyLearned {
  std::vector<PasskeyArm> arms;  // in order of first appearance
  std::vector<PasskeyPair> pairs;
  double alpha = 0.05;
};

// Throws std::invalid_argument for alpha outside (0, 1).
PasskeyLearned passkey_learned(const std::vector<PasskeyRun>& runs, double alpha = 0.05);

// The finished passkey fine-tunes of `runs` (task: needle, kind passkey; others skipped), arms
// labelled by the keys that vary but train.seed, task and init_from.
std::vector<PasskeyRun> passkey_runs(const RunSet& set, const std::vector<const RunEntry*>& runs);

// Markdown: the share per arm, the Fisher/Holm pairs, and exact match by distance over the seeds
// that learned (mean, with the count).
std::string format_passkey_learned_markdown(const PasskeyLearned& result, const std::vector<PasskeyRun>& runs);

// `export curves`: when `runs` hold passkey fine-tunes, writes passkey_learned.csv (per arm),
// passkey_learned_pairs.csv (per pair), passkey_learned_runs.csv (per run) and the figure
// passkey_learned_vs_distance (exact match against d/L over the seeds that learned), and adds the
// markdown to the printed tables. Nothing when there are none.
void passkey_learned_figures(const RunSet& set, const std::vector<const RunEntry*>& runs, Writer& w);

}  // namespace analysis
