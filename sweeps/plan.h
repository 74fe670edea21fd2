// What `sweep plan` and `sweep status` print, and the record of a sweep's expansion written next
// to its results (<sweep dir>/sweep.yaml, base.yaml, runs.tsv).
#pragma once

#include <string>
#include <vector>

#include "sweeps/run_status.h"
#include "sweeps/sweep_file.h"

namespace harness::sweeps {

std::vector<RunStatus> inspect_runs(const Sweep& sweep);

// One line per run: "<run id>  #<index>  key=value ...  <state>", then a count of done runs.
std::string format_plan(const Sweep& sweep, const std::vector<RunStatus>& statuses);
// One line per run: state, step/total and the latest validation loss per context.
std::string format_status(const Sweep& sweep, const std::vector<RunStatus>& statuses);
// "key=value key=value" of the keys that vary, for run i.
std::string varying_settings(const Sweep& sweep, size_t i);

// Writes <sweep dir>/sweep.yaml (the sweep file's text), base.yaml (when the base is a file) and
// runs.tsv (index, run id, varying keys), each atomically. Creates the sweep directory.
void write_sweep_record(const Sweep& sweep);

}  // namespace harness::sweeps
