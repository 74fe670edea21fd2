#include "analysis/report_provenance.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "analysis/html.h"
#include "common/build_info.h"
#include "results/run_paths.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

using html::escape;

std::string utc_text(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M UTC", &tm);
  return buffer;
}

std::string attribute(const results::RunRecord& r, const std::string& name) {
  const auto it = r.config.find(name);
  return it == r.config.end() || it->second.empty() ? "–" : it->second;
}

// The runs grouped by what made them: one row per distinct (revision, LibTorch, BLAS, device,
// threads, precision, config source).
std::string runs_provenance(const RunSet& set) {
  using Key = std::vector<std::string>;
  std::map<Key, std::vector<std::string>> groups;
  size_t without = 0;
  for (const auto& run : set.runs) {
    if (!run.record) {
      ++without;
      continue;
    }
    const auto& r = *run.record;
    groups[{attribute(r, "git_revision"), attribute(r, "libtorch_version"), attribute(r, "blas"),
            attribute(r, "device"), std::to_string(r.threads), attribute(r, "precision"), attribute(r, "source")}]
        .push_back(run.id);
  }
  std::string out =
      "<table>\n<caption>What made the runs, as their run.h5 files record it (/config)</caption>\n<thead><tr>"
      "<th scope=\"col\">revision</th><th scope=\"col\">LibTorch</th><th scope=\"col\">BLAS</th>"
      "<th scope=\"col\">device</th><th scope=\"col\">threads</th><th scope=\"col\">precision</th>"
      "<th scope=\"col\">config source</th><th scope=\"col\">runs</th></tr></thead>\n<tbody>\n";
  for (const auto& [key, ids] : groups) {
    out += "<tr>";
    for (const auto& field : key) out += fmt::format("<td><code>{}</code></td>", escape(field));
    std::vector<std::string> shown;
    for (size_t i = 0; i < ids.size() && i < 6; ++i) shown.push_back(escape(ids[i]));
    out += fmt::format("<td>{}: {}{}</td></tr>\n", ids.size(), fmt::join(shown, ", "), ids.size() > 6 ? ", …" : "");
  }
  out += "</tbody>\n</table>\n";
  if (without > 0)
    out += fmt::format("<p>{} run{} without a readable run.h5 (not started, or unreadable).</p>\n", without,
                       without == 1 ? "" : "s");
  return out;
}

// `harness sweep run` and `sweep submit` leave the sweep file they ran in the sweep's directory;
// its first line names the file.
std::string sweep_record(const RunSet& set) {
  const fs::path record = fs::path(set.dir) / "sweep.yaml";
  std::ifstream in(record);
  std::string first;
  if (!in || !std::getline(in, first)) return "";
  if (first.rfind("# ", 0) == 0) first = first.substr(2);
  return fmt::format("<dt>sweep record</dt><dd><code>{}</code>: {} (written by <code>harness sweep run</code> or "
                     "<code>harness sweep submit</code>)</dd>\n",
                     escape(record.string()), escape(first));
}

std::string page_provenance(const std::string& command) {
  const harness::CudaBuild cuda = harness::cuda_build();
  const unsigned cpus = std::thread::hardware_concurrency();
  std::string out = "<dl>\n";
  out += fmt::format("<dt>made by</dt><dd><code>harness {}</code> (LibTorch {})</dd>\n", escape(harness::git_revision()),
                     escape(harness::libtorch_version()));
  out += fmt::format("<dt>date</dt><dd>{}</dd>\n", escape(utc_now()));
  out += fmt::format("<dt>CPU</dt><dd>{} ({} logical CPU{})</dd>\n", escape(cpu_model()), cpus, cpus == 1 ? "" : "s");
  out += fmt::format("<dt>GPU</dt><dd>{} CUDA device{} visible (LibTorch CUDA: {})</dd>\n",
                     harness::visible_cuda_devices(), harness::visible_cuda_devices() == 1 ? "" : "s",
                     escape(cuda.libtorch_cuda.empty() ? "none" : cuda.libtorch_cuda));
  if (!command.empty()) out += fmt::format("<dt>command</dt><dd><code>{}</code></dd>\n", escape(command));
  return out + "</dl>\n";
}

}  // namespace

std::string utc_now() { return utc_text(std::time(nullptr)); }

std::string last_written(const std::string& dir) {
  struct stat st {};
  if (::stat(results::RunPaths(dir).results.c_str(), &st) != 0) return "";
  return utc_text(st.st_mtime);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown";
}

std::string provenance_section(const RunSet& set, const std::string& command) {
  std::string runs_dl = sweep_record(set);
  return fmt::format("<section id=\"provenance\">\n<h2>Provenance</h2>\n<h3>The runs</h3>\n{}{}"
                     "<p>Run files do not record the command that trained them.</p>\n<h3>This page</h3>\n{}</section>\n",
                     runs_provenance(set), runs_dl.empty() ? "" : "<dl>\n" + runs_dl + "</dl>\n",
                     page_provenance(command));
}

}  // namespace analysis
