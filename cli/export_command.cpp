// `harness export table|curves|pairs`: argument parsing only; the work is analysis/export/export_table.h,
// analysis/export_curves.h and analysis/pairwise_gaps.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/export_curves.h"
#include "analysis/export/export_table.h"
#include "analysis/export/from_csv.h"
#include "analysis/export/revisions.h"
#include "analysis/pairwise_gaps.h"
#include "analysis/run_set.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "sweeps/plan.h"
#include "sweeps/sweep_file.h"

namespace harness::cli {

namespace {

const char* kUsage =
    "usage: harness export table SWEEP_FILE|RUNS_DIR [--metric M] [--rows K,..] [--cols K,..]\n"
    "                            [--format md|csv|tex] [--best min|max|none] [--window-se] [--out FILE]\n"
    "         mean ± standard error over seeds (--window-se: and over validation windows); rows and\n"
    "         columns among the keys that vary and `context`; metrics: loss (default),\n"
    "         attention/<statistic>[@t or @txD], analysis/<statistic>,\n"
    "         needle/<accuracy|city_accuracy|number_accuracy|mean_log_prob> (docs/export.md)\n"
    "       harness export table --from-csv FILE [--best min|max|none] [--title T] [--plain]\n"
    "         a committed `export table --format csv` as Markdown, no runs read (--plain: any CSV, as written)\n"
    "       harness export table --from-curves LABEL=FILE[@X] ... [--best min|max|none]\n"
    "         a table of figure CSVs' series (`export curves`), one column per FILE: the row at x = X (default: last)\n"
    "       harness export curves SWEEP_FILE|RUNS_DIR|THEORY_FILE --out DIR [--theory FILE]\n"
    "         one CSV per figure and its SVG/PNG rendered with gnuplot\n"
    "       harness export pairs SWEEP_FILE|RUNS_DIR [--by K,..] [--arm A ...] [--level 0.95] [--format md|csv]\n"
    "                            [--out FILE]\n"
    "         the final validation loss's gap between every two arms (the values of --by, default\n"
    "         every varying key but the seed) at each context: paired by seed, windows clustered\n"
    "         by document, resolved by Holm's procedure at a family-wise 1 − level\n"
    "       harness export pairs --from-csv FILE [--sweep SWEEP_FILE]\n"
    "         a committed `export pairs --format csv` as Markdown, no runs read; verdicts by rule (its\n"
    "         family column, or Holm at its intervals' level); --sweep: contexts as multiples of its L,\n"
    "         and its `planned:` family decides the verdicts\n"
    "       harness export revisions SWEEP_FILE|RUNS_DIR ... [--train-minutes]\n"
    "         the revisions the runs were trained at, with counts (run.h5 /config git_revision);\n"
    "         --train-minutes: their training time summed instead (/train/seconds), in whole minutes\n"
    "examples:\n"
    "  harness export table sweeps/quickstart.yaml --format csv --out runs/quickstart/table.csv\n"
    "  harness export table sweeps/table1.yaml --metric attention/band_mass@10 --cols context\n"
    "  harness export curves sweeps/quickstart.yaml --out runs/quickstart/figures\n"
    "  harness export pairs sweeps/table1-same-text.yaml --out runs/table1-same-text/pairs.md";

// `export table --from-csv`: the Markdown of a committed table, or of any CSV with --plain.
int table_from_csv(const std::string& path, const po::variables_map& vm, const std::string& best,
                   const std::string& out) {
  const auto csv = analysis::read_csv(path);
  const std::string text =
      vm.count("plain") ? analysis::csv_as_markdown(csv)
                        : analysis::format_table(analysis::read_table_csv(
                                                     csv, best.empty() ? "none" : best,
                                                     vm.count("title") ? vm["title"].as<std::string>() : path),
                                                 "md");
  fmt::print("{}", text);
  if (!out.empty()) harness::write_file_atomically(out, text);
  return kExitOk;
}

int table(const Args& args) {
  po::options_description options("export table options");
  std::string input, format = "md", out, from_csv;
  std::vector<std::string> rows, cols;
  analysis::TableOptions o;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input), "a sweep file or a directory of runs");
  options.add_options()
      ("from-csv", po::value(&from_csv), "render a committed `export table --format csv` instead (no runs read)")
      ("title", po::value<std::string>(), "with --from-csv: the note's last words (default: the file)")
      ("plain", "with --from-csv: any CSV as a Markdown table, every field as written")
      ("from-curves", po::value<std::vector<std::string>>()->composing(), "LABEL=FILE[@X]: a column of figure CSV "
       "FILE's series at x = X (default: its last row); repeat it")
      ("metric", po::value(&o.metric)->default_value("loss"), "what the cells hold")
      ("rows", po::value(&rows)->composing(), "row keys, comma-separated (default: the varying keys but the seed)")
      ("cols", po::value(&cols)->composing(), "column keys (default: context)")
      ("format", po::value(&format)->default_value("md"), "md | csv | tex")
      ("best", po::value(&o.best), "mark the min or max of each column, or none (default: min for loss, max for needle "
       "accuracies, none for statistics)")
      ("window-se", "loss cells also show the standard error over validation windows")
      ("out", po::value(&out), "also write the table to FILE");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (vm.count("from-curves")) {
    if (!input.empty() || !from_csv.empty())
      throw InputError("export table: --from-curves reads figure CSVs only: no sweep, runs directory or --from-csv");
    std::vector<analysis::CurvesColumn> columns;
    for (const auto& a : vm["from-curves"].as<std::vector<std::string>>())
      columns.push_back(analysis::parse_curves_column(a));
    const std::string text = analysis::curves_table_markdown(columns, o.best.empty() ? "none" : o.best);
    fmt::print("{}", text);
    if (!out.empty()) harness::write_file_atomically(out, text);
    return kExitOk;
  }
  if (input.empty() == from_csv.empty())
    throw InputError(input.empty() ? "missing INPUT: a sweep file or a directory of runs (or --from-csv FILE, or --from-curves)"
                                     : "export table: INPUT or --from-csv FILE, not both");
  if (!from_csv.empty()) return table_from_csv(from_csv, vm, o.best, out);
  o.rows = split_commas(rows);
  o.cols = split_commas(cols);
  o.window_se = vm.count("window-se") > 0;
  const auto set = analysis::load_run_set(input);
  const auto t = analysis::build_table(set, o);
  const std::string text = analysis::format_table(t, format);
  fmt::print("{}", text);
  if (format == "csv")  // CSV stays machine-readable: the notes go to stderr
    for (const auto& line : t.missing) fmt::print(stderr, "missing: {}\n", line);
  for (const auto& w : t.warnings) fmt::print(stderr, "warning: {}\n", w);
  if (!out.empty()) {
    harness::write_file_atomically(out, text);
    fmt::print(stderr, "table: {}\n", out);
  }
  return kExitOk;
}

// `export pairs --from-csv`: a committed CSV's tables as Markdown; a sweep file gives L and its
// planned family.
int pairs_from_csv(const std::string& path, const std::string& sweep_path, const std::string& out) {
  auto pairs = analysis::read_pairs_csv(analysis::read_csv(path));
  if (pairs.tables.empty()) throw InputError(fmt::format("{}: no pair", path));
  int64_t L = 0;
  if (!sweep_path.empty()) {
    const auto sweep = harness::sweeps::load_sweep(sweep_path);
    for (const auto& run : sweep.runs) {
      const int64_t l = run.loaded.config.train_context();
      L = L == 0 || L == l ? l : -1;
    }
    for (auto& t : pairs.tables) t.train_context = std::max<int64_t>(L, 0);  // for a family of contexts as kL
    if (sweep.planned) analysis::apply_planned_family(pairs.tables, sweep.planned->correction, sweep.planned->alpha,
                                                      sweep.planned->multiples);
  }
  const std::string text = analysis::format_pairs_page(pairs, std::max<int64_t>(L, 0));
  fmt::print("{}", text);
  if (!out.empty()) harness::write_file_atomically(out, text);
  return kExitOk;
}

int pairs(const Args& args) {
  po::options_description options("export pairs options");
  std::string input, format = "md", out, from_csv, sweep;
  std::vector<std::string> by, arms;
  double level = 0.95;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input), "a sweep file or a directory of runs");
  options.add_options()
      ("from-csv", po::value(&from_csv), "render a committed `export pairs --format csv` instead (no runs read)")
      ("sweep", po::value(&sweep), "with --from-csv: the sweep file it came from (its L; its planned family)")
      ("by", po::value(&by)->composing(), "the keys whose values are the arms, comma-separated (default: every "
       "varying key but train.seed)")
      ("arm", po::value(&arms)->composing(), "compare only these arms (repeat it; labels as the table prints "
       "them), Holm over each context's pairs; a sweep's `planned:` block names its arms, family and criterion "
       "itself (used when --arm is absent or names the same arms)")
      ("level", po::value(&level)->default_value(0.95), "1 − the family-wise error rate of a context's pairs")
      ("format", po::value(&format)->default_value("md"), "md | csv")
      ("out", po::value(&out), "also write the tables to FILE");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (input.empty() == from_csv.empty())
    throw InputError(input.empty() ? "missing INPUT: a sweep file or a directory of runs (or --from-csv FILE)"
                                     : "export pairs: INPUT or --from-csv FILE, not both");
  if (!sweep.empty() && from_csv.empty()) throw InputError("export pairs: --sweep goes with --from-csv");
  if (!from_csv.empty()) return pairs_from_csv(from_csv, sweep, out);
  if (format != "md" && format != "csv") throw InputError(fmt::format("--format: expected md or csv, got '{}'", format));
  if (!(level > 0 && level < 1)) throw InputError(fmt::format("--level: expected a number in (0, 1), got {}", level));
  const auto set = analysis::load_run_set(input);
  std::vector<std::string> keys = split_commas(by);
  for (const auto& k : keys)
    if (std::find(set.keys.begin(), set.keys.end(), k) == set.keys.end())
      throw InputError(fmt::format("--by: '{}' does not vary in {}; keys that vary: {}", k, input,
                                   fmt::join(set.keys, ", ")));
  if (keys.empty())
    for (const auto& k : set.keys)
      if (k != "train.seed") keys.push_back(k);
  if (keys.empty()) throw InputError(fmt::format("{}: no key but the seed varies: there are no arms to compare", input));
  std::vector<analysis::PairTable> tables;
  auto grids = analysis::arm_grid(set, keys);
  // A sweep's `planned:` comparison is tested as registered: its arms, its family and criterion.
  const bool planned = set.planned && (arms.empty() || arms == set.planned->arms);
  if (set.planned && !planned)
    fmt::print(stderr, "warning: --arm names other arms than {}'s planned comparison ({}): tested as an unplanned "
                       "comparison, Holm over each context's pairs\n", input, fmt::join(set.planned->arms, ", "));
  if (planned) arms = set.planned->arms;
  if (grids.empty()) throw InputError(fmt::format("{}: no finished run to compare", input));
  if (!arms.empty())
    analysis::keep_arms(grids, arms, planned ? fmt::format("{}: planned.arms", set.planned->at.str()) : "--arm");
  for (const auto& grid : grids) tables.push_back(analysis::pairwise_gaps(grid, level));
  if (tables.empty()) throw InputError(fmt::format("{}: no finished run to compare", input));
  if (planned) analysis::apply_planned_family(tables, set.planned->correction, set.planned->alpha, set.planned->multiples);
  int64_t L = set.runs.front().train_context;  // contexts are labelled as multiples of L when all share it
  for (const auto& run : set.runs)
    if (run.train_context != L) L = 0;
  const std::string text = format == "csv" ? analysis::format_pairs_csv(tables)
                                           : analysis::format_pairs_markdown(tables, L);
  fmt::print("{}", text);
  for (const auto& w : set.warnings) fmt::print(stderr, "warning: {}\n", w);
  if (!out.empty()) {
    harness::write_file_atomically(out, text);
    fmt::print(stderr, "pairs: {}\n", out);
  }
  return kExitOk;
}

int curves(const Args& args) {
  po::options_description options("export curves options");
  std::string input;
  analysis::CurvesOptions o;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&input)->required(),
                          "a sweep file, a run or runs directory, or a theory file (entropy, critical)");
  options.add_options()
      ("out", po::value(&o.out_dir)->required(), "directory for the CSV, gnuplot, SVG and PNG files")
      ("theory", po::value(&o.theory), "a `harness theory entropy` file to overlay on the runs' figures");
  po::positional_options_description positional;
  positional.add("input", 1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  const auto result = analysis::export_curves(input, o);
  std::vector<std::string> failed;
  for (const auto& f : result.figures) {
    if (!f.render.images.empty())
      fmt::print("{}: {}\n", f.name, fmt::join(f.render.images, ", "));
    else
      fmt::print("{}: {} (not rendered: {})\n", f.name, fmt::join(f.csv, ", "), f.render.notice);
    if (f.render.failed) failed.push_back(f.render.notice);
  }
  for (const auto& table : result.tables) fmt::print("\n{}", table);
  for (const auto& note : result.notes) fmt::print(stderr, "note: {}\n", note);
  if (!failed.empty())
    throw std::runtime_error(fmt::format("{} figure(s) not drawn: {}", failed.size(), fmt::join(failed, "; ")));
  return kExitOk;
}

int revisions(const Args& args) {
  po::options_description options("export revisions options");
  std::vector<std::string> inputs;
  po::options_description arguments;
  arguments.add_options()("input", po::value(&inputs)->composing(), "sweep files or directories of runs");
  options.add_options()("train-minutes", "print the runs' training time summed, in whole minutes");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  if (!parse(kUsage, args, options, vm, &positional, &arguments)) return kExitOk;
  if (inputs.empty()) throw InputError("missing INPUT: one or more sweep files or directories of runs");
  std::vector<analysis::RunSet> sets;
  for (const auto& input : inputs) sets.push_back(analysis::load_run_set(input));
  for (const auto& set : sets)
    for (const auto& w : set.warnings) fmt::print(stderr, "warning: {}\n", w);
  if (vm.count("train-minutes"))
    fmt::print("{:.0f}\n", analysis::training_seconds(sets) / 60);
  else
    fmt::print("{}\n", analysis::trained_revisions(sets));
  return kExitOk;
}

}  // namespace

int export_command(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    fmt::print("{}\n", kUsage);
    return args.empty() ? kExitBadInput : kExitOk;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "table") return table(rest);
  if (args[0] == "curves") return curves(rest);
  if (args[0] == "pairs") return pairs(rest);
  if (args[0] == "revisions") return revisions(rest);
  throw InputError(fmt::format("export: unknown action '{}'; expected table, curves, pairs or revisions\n\n{}", args[0], kUsage));
}

}  // namespace harness::cli
