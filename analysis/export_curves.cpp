#include "analysis/export_curves.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "analysis/export/run_figures.h"
#include "analysis/run_set.h"
#include "analysis/stats/passkey_learned.h"
#include "analysis/theory/critical_figures.h"
#include "analysis/theory/critical_scaling_file.h"
#include "analysis/theory/theory_figures.h"
#include "common/errors.h"
#include "results/hdf5_io.h"

namespace fs = std::filesystem;

namespace analysis {

TheoryGroups read_theory(const std::string& path) {
  if (results_file_kind(path) != "theory-entropy")
    throw harness::InputError(fmt::format("--theory: {} is not a `harness theory entropy` file", path));
  auto file = results::h5::open_file(path);
  TheoryGroups out;
  for (const auto& name : results::h5::member_names(file)) out.emplace_back(name, results::read_group(file, name));
  return out;
}

std::string results_file_kind(const std::string& path) {
  if (fs::is_directory(path) || fs::path(path).extension() != ".h5") return "";
  try {
    return results::h5::file_kind(path);
  } catch (const std::exception&) {
    return "";  // not HDF5: not a results file
  }
}

CurvesResult export_curves(const std::string& input, const CurvesOptions& o) {
  if (o.out_dir.empty()) throw harness::InputError("export curves: --out DIR is required");
  // Everything is read and checked before DIR is created: a bad input leaves nothing behind.
  CurvesResult out;
  Writer w{o.out_dir, out, {}};
  const std::string kind = results_file_kind(input);
  if (kind == "theory-entropy") {
    const auto theory = read_theory(input);
    fs::create_directories(o.out_dir);
    const auto file = results::h5::open_file(input);
    theory_figures(theory, results::h5::read_int_attr(file, "trials"), w);
    return out;
  }
  if (kind == kCriticalScalingKind) {
    const auto figures = export_critical_scaling_figures(input, o.out_dir);
    FigureFiles f;
    f.name = "critical-scaling";
    for (const auto& file : figures.files) {
      if (fs::path(file).extension() == ".csv") f.csv.push_back(file);
      if (fs::path(file).extension() == ".svg" || fs::path(file).extension() == ".png") f.render.images.push_back(file);
    }
    for (const auto& n : figures.notices) out.notes.push_back(n);
    out.figures.push_back(std::move(f));
    out.tables.push_back(figures.gamma_c_table);
    return out;
  }
  if (!kind.empty()) throw harness::InputError(fmt::format("{}: no figures for a '{}' file", input, kind));
  const RunSet set = load_run_set(input);
  out.notes.insert(out.notes.end(), set.warnings.begin(), set.warnings.end());
  const auto runs = done_runs(set);
  if (runs.empty()) {
    out.notes.push_back(fmt::format("{}: no run is done yet: nothing to draw", input));
    return out;
  }
  if (runs.size() < set.runs.size())
    out.notes.push_back(fmt::format("{} of {} runs are not done and are left out", set.runs.size() - runs.size(),
                                    set.runs.size()));
  const auto theory = o.theory.empty() ? TheoryGroups{} : read_theory(o.theory);
  fs::create_directories(o.out_dir);
  run_figures(set, runs, theory, w);
  passkey_learned_figures(set, runs, w);  // passkey fine-tunes: the share of seeds that learned to copy
  return out;
}

}  // namespace analysis
