// The figures of `harness tau law`: per validation context, each L's loss above its best τ against
// τ / L (mean over seeds ± s.e., the y range set so that 0.01 nats show), and τ* against L on
// log-log axes with its seed-bootstrap interval, beside the paper's τ = L/400. CSV beside each.
#pragma once

#include <string>
#include <vector>

#include "analysis/export/figure_writer.h"
#include "analysis/tau/law.h"

namespace analysis {

// tau_law_loss_<k>L per context factor k, and tau_law_star, into `dir`.
CurvesResult write_tau_law_figures(const std::string& dir, const std::vector<TauLawCurve>& curves, const TauLaw& law);

}  // namespace analysis
