#include "sweeps/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <stdexcept>

#include "common/atomic_file.h"

namespace fs = std::filesystem;

namespace harness::sweeps {

namespace {

// Column widths so that key=value columns line up across runs.
std::vector<size_t> setting_widths(const Sweep& sweep) {
  std::vector<size_t> widths;
  for (const auto& key : sweep.varying_keys) {
    size_t w = 0;
    for (size_t i = 0; i < sweep.runs.size(); ++i)
      w = std::max(w, key.size() + 1 + sweep.value_text(i, key).size());
    widths.push_back(w);
  }
  return widths;
}

std::string padded_settings(const Sweep& sweep, size_t i, const std::vector<size_t>& widths) {
  std::string out;
  for (size_t k = 0; k < sweep.varying_keys.size(); ++k) {
    const auto& key = sweep.varying_keys[k];
    out += fmt::format("{:<{}}  ", key + "=" + sweep.value_text(i, key), widths[k]);
  }
  return out;
}

std::string header(const Sweep& sweep) {
  return fmt::format("# sweep {} ({}): {} run{} → {}/\n", sweep.name, sweep.path, sweep.runs.size(),
                     sweep.runs.size() == 1 ? "" : "s", sweep.sweep_dir);
}

std::string counts(const std::vector<RunStatus>& statuses) {
  std::map<std::string, size_t> by_state;
  for (const auto& s : statuses) ++by_state[state_name(s)];
  std::string out = fmt::format("{} of {} runs done", by_state["done"], statuses.size());
  for (const char* s : {"pending", "running", "interrupted", "failed", "unreadable"})
    if (by_state[s]) out += fmt::format(", {} {}", by_state[s], s);
  return out + "\n";
}

std::string state_text(const RunStatus& s) {
  std::string out = state_name(s);
  if (s.state == RunState::kRunning && !s.holder.empty()) out += fmt::format(" ({})", s.holder);
  if (s.killed) out += " (killed)";
  return out;
}

}  // namespace

std::vector<RunStatus> inspect_runs(const Sweep& sweep) {
  std::vector<RunStatus> out;
  for (const auto& run : sweep.runs) out.push_back(inspect_run(run));
  return out;
}

std::string varying_settings(const Sweep& sweep, size_t i) {
  std::string out;
  for (const auto& key : sweep.varying_keys)
    out += (out.empty() ? "" : " ") + key + "=" + sweep.value_text(i, key);
  return out;
}

std::string merged_points(const PlannedRun& run) {
  if (run.merged.empty()) return "";
  // The keys whose written values differ between the run's points, with every value they take.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<std::string>> values;
  const auto note = [&](const std::vector<Setting>& settings) {
    for (const auto& s : settings) {
      auto& list = values[s.key];
      if (std::find(keys.begin(), keys.end(), s.key) == keys.end()) keys.push_back(s.key);
      if (std::find(list.begin(), list.end(), s.value.text) == list.end()) list.push_back(s.value.text);
    }
  };
  note(run.settings);
  for (const auto& m : run.merged) note(m);
  std::vector<std::string> parts;
  for (const auto& key : keys)
    if (values[key].size() > 1) parts.push_back(fmt::format("{}={}", key, fmt::join(values[key], "|")));
  return fmt::format("  ({} points, one run: {})", run.merged.size() + 1, fmt::join(parts, " "));
}

// "  (waiting on pretraining run <id>: <state>)" for a needle run that is not done and whose
// pretraining run is not done either.
static std::string waiting_text(const PlannedRun& run, const RunStatus& status) {
  if (status.state == RunState::kDone) return "";
  const auto p = pretraining_of(run);
  if (!p || p->status.state == RunState::kDone) return "";
  return fmt::format("  (waiting on pretraining run {}: {})", p->id,
                     std::filesystem::exists(p->dir) ? state_name(p->status) : "missing, in " + p->dir);
}

std::string format_plan(const Sweep& sweep, const std::vector<RunStatus>& statuses) {
  std::string out = header(sweep);
  const auto widths = setting_widths(sweep);
  size_t points = 0;
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    out += fmt::format("{}  #{:<3} {}{}{}{}\n", sweep.runs[i].id, i, padded_settings(sweep, i, widths),
                       state_text(statuses[i]), waiting_text(sweep.runs[i], statuses[i]),
                       merged_points(sweep.runs[i]));
    points += 1 + sweep.runs[i].merged.size();
  }
  if (points > sweep.runs.size())
    out += fmt::format("{} points of the sweep are {} runs: points that differ only in keys a run "
                       "does not read (–), or only in how a value is written, are one run\n", points, sweep.runs.size());
  return out + counts(statuses);
}

std::string format_status(const Sweep& sweep, const std::vector<RunStatus>& statuses) {
  std::string out = header(sweep);
  const auto widths = setting_widths(sweep);
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const RunStatus& s = statuses[i];
    std::string losses;
    if (!s.eval_loss.empty()) {
      losses = fmt::format("  val@{}", s.eval_step);
      for (const auto& [T, loss] : s.eval_loss) losses += fmt::format("  {}: {:.4f}", T, loss);
    }
    if (!s.needle_accuracy.empty()) {
      losses += "  needle accuracy";
      for (const auto& [T, accuracy] : s.needle_accuracy) losses += fmt::format("  {}: {:.3f}", T, accuracy);
    }
    std::string detail;
    if (s.state == RunState::kRunning && !s.holder.empty()) detail = "pid " + s.holder;
    else if (s.state != RunState::kDone && !s.reason.empty()) detail = s.reason;
    out += fmt::format("{}  #{:<3} {}{:<11} {:>9}{}{}{}\n", sweep.runs[i].id, i,
                       padded_settings(sweep, i, widths), state_name(s),
                       fmt::format("{}/{}", s.step, s.total), losses,
                       detail.empty() ? "" : "  (" + detail + ")", waiting_text(sweep.runs[i], s));
  }
  return out + counts(statuses);
}

void write_sweep_record(const Sweep& sweep) {
  fs::create_directories(sweep.sweep_dir);
  const fs::path dir(sweep.sweep_dir);
  harness::write_file_atomically((dir / "sweep.yaml").string(),
                        fmt::format("# sweep file {} as last run or submitted\n{}", sweep.path, sweep.text));
  if (!sweep.base_path.empty())
    harness::write_file_atomically((dir / "base.yaml").string(),
                          fmt::format("# base config {}\n{}", sweep.base_path, sweep.base_text));
  std::string tsv = "index\trun_id";
  for (const auto& key : sweep.varying_keys) tsv += "\t" + key;
  tsv += "\n";
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    tsv += fmt::format("{}\t{}", i, sweep.runs[i].id);
    for (const auto& key : sweep.varying_keys) tsv += "\t" + sweep.value_text(i, key);
    tsv += "\n";
  }
  harness::write_file_atomically((dir / "runs.tsv").string(), tsv);
}

}  // namespace harness::sweeps
