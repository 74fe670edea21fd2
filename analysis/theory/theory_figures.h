// The figures of a `harness theory entropy` file (analysis/theory/theory_entropy.h):
// entropy and recent mass against the number of keys (Fig. 1), band entropy, entropy per distance
// range with the ln t and √(ln t) fits (Figs 2, 6), and Lemma 1's total attention per range, each
// mean ± s.e. over the file's trials. Drawn through the export layer (analysis/export/figure_writer.h).
#pragma once

#include <cstdint>

#include "analysis/export/figure_writer.h"

namespace analysis {

void theory_figures(const TheoryGroups& theory, int64_t trials, Writer& w);

}  // namespace analysis
