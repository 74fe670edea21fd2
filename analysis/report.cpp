#include "analysis/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "analysis/export/export_table.h"
#include "analysis/export/run_figures.h"
#include "analysis/export_curves.h"
#include "analysis/html.h"
#include "analysis/report_provenance.h"
#include "common/atomic_file.h"
#include "common/errors.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

using html::escape;

// Screen: one readable column. Print: no figure or table row cut across pages, table headers
// repeated, no navigation.
const char* kStyle = R"(
body { font-family: sans-serif; color: #222; max-width: 62rem; margin: 1.5rem auto; padding: 0 1rem; line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; border-bottom: 1px solid #ccc; margin-top: 2rem; }
nav ul ul { display: flex; flex-wrap: wrap; gap: 0 1.2rem; padding-left: 1rem; list-style: none; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
caption { caption-side: top; text-align: left; color: #444; padding-bottom: .3rem; }
th, td { border: 1px solid #bbb; padding: .2rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { background: #eee; }
.state-done { color: #17663a; } .state-running { color: #1f4e9a; }
.state-failed, .state-unreadable { color: #a3261b; font-weight: bold; } .state-interrupted { color: #8a5a00; }
figure { margin: 1.5rem 0; }
figure svg { display: block; width: 100%; max-width: 56rem; height: auto; }
figcaption { font-size: .9rem; color: #444; }
.note { color: #8a5a00; }
code { font-size: .9em; }
@media print {
  @page { size: A4; margin: 1.5cm; }
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  figure, tr, .keep { break-inside: avoid; page-break-inside: avoid; }
  figure svg { max-height: 16cm; }
  thead { display: table-header-group; }
  a { color: inherit; text-decoration: none; }
}
)";

std::string table_html(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       const std::string& caption = "") {
  std::string out = "<table>\n";
  if (!caption.empty()) out += fmt::format("<caption>{}</caption>\n", caption);
  out += "<thead><tr>";
  for (const auto& h : head) out += fmt::format("<th scope=\"col\">{}</th>", h);
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) out += fmt::format("<tr>{}</tr>\n", fmt::join(row, ""));
  return out + "</tbody>\n</table>\n";
}

std::string td(const std::string& inner_html, const std::string& cls = "") {
  return cls.empty() ? fmt::format("<td>{}</td>", inner_html) : fmt::format("<td class=\"{}\">{}</td>", cls, inner_html);
}

std::string list_html(const std::vector<std::string>& items_html, const std::string& cls = "") {
  if (items_html.empty()) return "";
  std::string out = cls.empty() ? "<ul>\n" : fmt::format("<ul class=\"{}\">\n", cls);
  for (const auto& i : items_html) out += fmt::format("<li>{}</li>\n", i);
  return out + "</ul>\n";
}

// The results: `harness export table`'s default table, cell for cell.
std::string results_section(const RunSet& set, bool any_done) {
  std::string out = "<section id=\"results\">\n<h2>Results</h2>\n";
  if (!any_done) return out + "<p class=\"note\">No run is done yet: no results to show.</p>\n</section>\n";
  Table t;
  try {
    t = build_table(set, {});
  } catch (const harness::InputError& e) {
    return out + fmt::format("<p class=\"note\">No table: {}</p>\n</section>\n", escape(e.what()));
  }
  std::vector<std::string> head;
  for (const auto& k : t.row_keys) head.push_back(fmt::format("<code>{}</code>", escape(k)));
  for (const auto& c : t.col_names) head.push_back(escape(c));
  std::vector<std::vector<std::string>> rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    std::vector<std::string> row;
    for (const auto& v : t.rows[r]) row.push_back(fmt::format("<th scope=\"row\">{}</th>", escape(v)));
    for (size_t c = 0; c < t.cols.size(); ++c) {
      const std::string text = escape(cell_text(t.cells[r][c], "±", t.window_se));
      row.push_back(td(t.best[r][c] ? "<strong>" + text + "</strong>" : text, "num"));
    }
    rows.push_back(std::move(row));
  }
  out += table_html(head, rows,
                    fmt::format("Final validation loss (nats per token) by context: mean ± standard error over "
                                "seeds (number of seeds); the lowest of each column in bold. {}",
                                escape(t.title)));
  if (!t.missing.empty()) {
    std::vector<std::string> missing;
    for (const auto& m : t.missing) missing.push_back(escape(m));
    out += fmt::format("<p>Not in the table: {} run{} not done.</p>\n", missing.size(), missing.size() == 1 ? "" : "s");
    out += list_html(missing);
  }
  return out + "</section>\n";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One <figure> per figure of `harness export curves`: the SVG inline, each CSV as a data: link.
std::string figure_html(const FigureFiles& f, size_t index) {
  std::string svg_path;
  for (const auto& image : f.render.images)
    if (fs::path(image).extension() == ".svg") svg_path = image;
  std::string out = fmt::format("<figure id=\"{}\">\n", html::anchor("figure-", f.name));
  if (!svg_path.empty())
    out += html::inline_svg(read_file(svg_path), fmt::format("f{}-", index), f.name) + "\n";
  std::vector<std::string> links;
  for (const auto& csv : f.csv) {
    const std::string file = fs::path(csv).filename().string();
    links.push_back(fmt::format("<a download=\"{}\" href=\"{}\">{}</a>", escape(file),
                                escape(html::data_uri("text/csv;charset=utf-8", read_file(csv))), escape(file)));
  }
  out += fmt::format("<figcaption><code>{}</code>{}{}</figcaption>\n</figure>\n", escape(f.name),
                     links.empty() ? "" : fmt::format(" — data: {}", fmt::join(links, ", ")),
                     svg_path.empty() ? fmt::format(" <span class=\"note\">(not drawn: {})</span>", escape(f.render.notice))
                                      : "");
  return out;
}

std::string figures_section(const CurvesResult& curves, bool any_done) {
  std::string out = "<section id=\"figures\">\n<h2>Figures</h2>\n";
  if (!any_done) return out + "<p class=\"note\">No run is done yet: nothing to draw.</p>\n</section>\n";
  if (curves.figures.empty()) out += "<p class=\"note\">No figure for these runs.</p>\n";
  for (size_t i = 0; i < curves.figures.size(); ++i) out += figure_html(curves.figures[i], i);
  return out + "</section>\n";
}

// Each run: its state as the sweep commands report it, how far it got and why it stopped.
std::string runs_section(const RunSet& set) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : set.runs) {
    const std::string step = run.record ? fmt::format("{} / {}", run.record->status_step, run.config.train.steps)
                                        : fmt::format("– / {}", run.config.train.steps);
    rows.push_back({fmt::format("<th scope=\"row\"><code>{}</code></th>", escape(run.id)),
                    td(escape(run.state), html::anchor("state-", run.state)), td(escape(step), "num"),
                    td(run.record ? escape(run.record->reason) : ""), td(fmt::format("<code>{}</code>", escape(run.dir))),
                    td(escape(last_written(run.dir)))});
  }
  std::map<std::string, int> counts;
  for (const auto& run : set.runs) ++counts[run.state];
  std::vector<std::string> summary;
  for (const auto& [state, n] : counts) summary.push_back(fmt::format("{} {}", n, escape(state)));
  return fmt::format("<section id=\"runs\">\n<h2>Runs</h2>\n<p>{} run{}: {}.</p>\n{}</section>\n", set.runs.size(),
                     set.runs.size() == 1 ? "" : "s", fmt::join(summary, ", "),
                     table_html({"run", "state", "step", "reason", "directory", "run.h5 written"}, rows));
}

// The keys whose values differ between the runs, and each run's values; every other key is the
// same in all of them.
std::string config_section(const RunSet& set) {
  std::string out = "<section id=\"config\">\n<h2>Config differences</h2>\n";
  if (set.keys.empty())
    return out + "<p>No config key differs between the runs.</p>\n</section>\n";
  std::vector<std::string> head = {"run"};
  for (const auto& k : set.keys) head.push_back(fmt::format("<code>{}</code>", escape(k)));
  std::vector<std::vector<std::string>> rows;
  for (const auto& run : set.runs) {
    std::vector<std::string> row = {fmt::format("<th scope=\"row\"><code>{}</code></th>", escape(run.id))};
    for (const auto& k : set.keys) {
      const auto it = run.values.find(k);
      row.push_back(td(escape(it == run.values.end() ? "" : it->second)));
    }
    rows.push_back(std::move(row));
  }
  out += fmt::format("<p>The {} key{} whose values differ between the runs (– : a key the run does not read); every "
                     "other key is the same in all of them.</p>\n",
                     set.keys.size(), set.keys.size() == 1 ? "" : "s");
  return out + table_html(head, rows) + "</section>\n";
}

std::string nav_html(const CurvesResult& curves) {
  std::vector<std::string> figures;
  for (const auto& f : curves.figures)
    figures.push_back(fmt::format("<a href=\"#{}\">{}</a>", html::anchor("figure-", f.name), escape(f.name)));
  std::string figure_list = figures.empty() ? "" : "\n" + list_html(figures);
  return fmt::format("<nav aria-label=\"contents\">\n<ul>\n<li><a href=\"#results\">Results</a></li>\n"
                     "<li><a href=\"#runs\">Runs</a></li>\n<li><a href=\"#config\">Config differences</a></li>\n"
                     "<li><a href=\"#figures\">Figures</a>{}</li>\n"
                     "<li><a href=\"#provenance\">Provenance</a></li>\n</ul>\n</nav>\n",
                     figure_list);
}

}  // namespace

std::string default_report_path(const RunSet& set) { return (fs::path(set.dir) / "report.html").string(); }

std::string report_page(const RunSet& set, const TheoryGroups& theory, const std::string& figures_dir,
                        const ReportOptions& options, std::vector<std::string>& notes) {
  notes.insert(notes.end(), set.warnings.begin(), set.warnings.end());
  const auto done = done_runs(set);
  CurvesResult curves;
  if (!done.empty()) {
    fs::create_directories(figures_dir);
    Writer w{figures_dir, curves, {}};
    run_figures(set, done, theory, w);
    for (const auto& f : curves.figures)
      if (!f.render.notice.empty()) notes.push_back(fmt::format("{}: {}", f.name, f.render.notice));
  }
  notes.insert(notes.end(), curves.notes.begin(), curves.notes.end());
  std::string warnings;
  if (!notes.empty()) {
    std::vector<std::string> items;
    for (const auto& n : notes) items.push_back(escape(n));
    warnings = "<section id=\"notes\" class=\"note\">\n<h2>Notes</h2>\n" + list_html(items) + "</section>\n";
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{0} — harness report</title>\n"
      "<style>{1}</style>\n</head>\n<body>\n<header>\n<h1>{0}</h1>\n<p>{2} run{3} in <code>{4}</code>; "
      "report made {5}.</p>\n{6}</header>\n<main>\n{7}{8}{9}{10}{11}{12}</main>\n</body>\n</html>\n",
      escape(set.name), kStyle, set.runs.size(), set.runs.size() == 1 ? "" : "s", escape(set.dir), escape(utc_now()),
      nav_html(curves), results_section(set, !done.empty()), runs_section(set), config_section(set),
      figures_section(curves, !done.empty()), provenance_section(set, options.command), warnings);
}

ReportResult write_report(const std::string& input, const ReportOptions& options) {
  const RunSet set = load_run_set(input);
  const TheoryGroups theory = options.theory.empty() ? TheoryGroups{} : read_theory(options.theory);
  ReportResult r;
  r.page = options.out.empty() ? default_report_path(set) : options.out;
  r.figures_dir = (fs::path(r.page).parent_path() / (fs::path(r.page).stem().string() + "-figures")).string();
  const std::string page = report_page(set, theory, r.figures_dir, options, r.notes);
  if (!fs::exists(r.figures_dir)) r.figures_dir.clear();
  harness::write_file_atomically(r.page, page);
  return r;
}

}  // namespace analysis
