// The optimiser's settings (torch-free, so a run config can hold them: harness/config/run_config.h).
// The optimisers themselves: models/optimizers.h.
#pragma once

#include <string>
#include <vector>

namespace models {

// Defaults for the CPU-scale model (2–4 layers, d_model 128, byte-level, context 64, batch 32).
// The paper's 162M-model values are lr_embed 0.3, lr_hidden 0.02 (Muon), lr_head = lr_scalar
// 0.002, betas (0.9, 0.95), and they carry over except the head: its lr is 4× the paper's.
// Experiment (200 steps, batch 32 × 64 bytes of English licence text, constant-cooldown 0.4,
// 2 layers, seed 0; validation loss in nats/byte on held-out text):
//   si+p-rope   muon head 0.002: 1.593   head 0.008: 1.550   head 0.02: 1.566
//               muon lr_hidden 0.04 (head 0.008): 1.576
//               adamw (head 0.008) lr_hidden 0.002: 1.739   0.004: 1.734   0.008: 1.868
//   logn+p-rope muon, head 0.008, lr_scalar 0.002: 1.554   0.008: 1.571   0.03: 1.610
//   with the positional-free placeholder attention (2 layers unless noted):
//     muon lr_hidden 0.01 / 0.02 / 0.04 / 0.08: 2.350 / 2.317 / 2.360 / 2.408
//     lr_embed 0.03 / 0.1 / 0.3 / 1.0: 2.343 / 2.298 / 2.317 / 2.292
//     lr_head 0.0005 / 0.002 / 0.008 / 0.02: 2.551 / 2.317 / 2.226 / 2.260;  4 layers 0.002 → 2.123,
//     0.008 → 1.948;  seed 1: 2.262 → 2.183
//     eps 1e-8 vs 1e-10: 2.318 vs 2.317;  standard N(0, 0.02) init of head/o/proj instead of zero:
//     2.283 (head 0.002) and 2.261 (head 0.008) vs 2.226 zero-init; grad clip 1.0: 2.227 (same).
// The zero-initialised head learns slowly at 0.002 over a few hundred steps, hence 0.008.
struct OptimOptions {
  std::string name = "muon";  // muon | adamw   (see optimizer_names())
  double lr_hidden = 0.02;    // Muon lr for the hidden matrices (adamw: its AdamW lr)
  double lr_embed = 0.3;
  double lr_head = 0.008;
  double lr_scalar = 0.002;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-10;
  double weight_decay = 0.0;  // hidden group only
  double momentum = 0.95;     // Muon
};

// Recommended defaults for an optimiser name: for "adamw", lr_hidden = 0.003 (an AdamW learning
// rate; Muon's 0.02 is far too large for Adam on matrices, see above); everything else as
// OptimOptions{}.
OptimOptions default_optim_options(const std::string& name);

std::vector<std::string> optimizer_names();  // {"muon", "adamw"}
// Throws std::invalid_argument (listing the valid names) on an unknown name, and on negative
// learning rates / weight decay, betas or momentum outside [0, 1), eps <= 0.
void validate(const OptimOptions& options);

}  // namespace models
