// The provenance section of `harness report` (analysis/report.h): what made the runs, as their
// run.h5 files record it (/config: git_revision, libtorch_version, blas, device, threads,
// precision, source), the sweep record `harness sweep run|submit` leaves (<sweep dir>/sweep.yaml),
// and what made the page (this binary's revision and LibTorch, the date, the CPU model, the CUDA
// devices it sees, the command line). Run files do not record the command that trained them.
#pragma once

#include <string>

#include "analysis/run_set.h"

namespace analysis {

// <section id="provenance">…</section>, every string escaped.
std::string provenance_section(const RunSet& set, const std::string& command);

// "2026-12-07 10:31 UTC".
std::string utc_now();

// When <dir>/run.h5 was last written ("2026-12-07 10:31 UTC"), "" when it does not exist.
std::string last_written(const std::string& dir);

// The CPU model as /proc/cpuinfo names it ("AMD EPYC 7B13"), "unknown" where it cannot be read.
std::string cpu_model();

}  // namespace analysis
