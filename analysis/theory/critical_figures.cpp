#include "analysis/theory/critical_figures.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "analysis/theory/critical_scaling_file.h"
#include "analysis/export/plot.h"
#include "common/atomic_file.h"

namespace fs = std::filesystem;

namespace analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// viridis at five stops: perceptually uniform, readable in grey.
const char* kPalette =
    "set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')\n";

// Cell edges of a grid for box plots: arithmetic midpoints (ρ) or geometric ones (γ on a log
// axis, γ > 0 only: γ = 0 gets NaN edges and drops out of the plot, not out of the CSV).
std::vector<std::pair<double, double>> edges(const std::vector<double>& v, bool geometric) {
  const size_t n = v.size();
  std::vector<std::pair<double, double>> out(n, {kNaN, kNaN});
  if (n == 1) return {{v[0] - 0.025, v[0] + 0.025}};
  const auto mid = [&](double a, double b) { return geometric ? std::sqrt(a * b) : 0.5 * (a + b); };
  for (size_t k = 0; k < n; ++k) {
    if (geometric && !(v[k] > 0)) continue;
    const bool has_prev = k > 0 && (!geometric || v[k - 1] > 0);
    const bool has_next = k + 1 < n;
    const double lo_prev = has_prev ? mid(v[k - 1], v[k]) : kNaN;
    const double hi_next = has_next ? mid(v[k], v[k + 1]) : kNaN;
    // At an end, mirror the other side's half-width (a ratio on the log axis).
    const double lo = has_prev ? lo_prev : (geometric ? v[k] * v[k] / hi_next : 2 * v[k] - hi_next);
    const double hi = has_next ? hi_next : (geometric ? v[k] * v[k] / lo_prev : 2 * v[k] - lo_prev);
    out[k] = {lo, hi};
  }
  return out;
}

std::string number(double v) { return fmt::format("{:.9g}", v); }

// γ runs from 0 over decades: the heatmaps draw it on an asinh axis (linear near 0, logarithmic
// above `scale`), so the γ = 0 row shows. Cell edges are midpoints in that coordinate.
std::vector<std::pair<double, double>> asinh_edges(const std::vector<double>& v, double scale) {
  std::vector<double> u(v.size());
  for (size_t k = 0; k < v.size(); ++k) u[k] = std::asinh(v[k] / scale);
  std::vector<std::pair<double, double>> out;
  for (const auto& [lo, hi] : edges(u, false))
    out.push_back({std::max(0.0, scale * std::sinh(lo)), scale * std::sinh(hi)});
  return out;
}

// Tics for the asinh γ axis up to `top`: 0, then 1–3–10 steps from the scale's decade.
std::string asinh_tics(double scale, double top) {
  std::vector<std::string> tics = {"0"};
  for (double decade = std::pow(10.0, std::floor(std::log10(scale))); decade <= top; decade *= 10)
    for (const double m : {1.0, 3.0})
      if (m * decade <= top && m * decade >= scale) tics.push_back(number(m * decade));
  return fmt::format("set ytics ({})\n", fmt::join(tics, ", "));
}

void add_render(CriticalFigures& figures, const std::string& dir, const std::string& stem,
                const std::string& body) {
  const auto r = render_gnuplot(dir, stem, body);
  figures.files.push_back(r.script);
  for (const auto& image : r.images) figures.files.push_back(image);
  if (!r.notice.empty()) figures.notices.push_back(r.notice);
}

// Columns of critical_gamma_c_n<n>.csv (1-based, as gnuplot counts): rho, gamma_c_theory, per d
// c_in, 1/(1−c_in), γ̂_c; then per d γ̂_c where the γ grid brackets it and where it does not.
size_t in_grid_column(const CriticalScalingResult& r, size_t id) { return 3 + 3 * r.D + 2 * id; }
size_t beyond_column(const CriticalScalingResult& r, size_t id) { return 4 + 3 * r.D + 2 * id; }

std::string cell_label(int64_t n, int64_t d) { return fmt::format("n{}_d{}", n, d); }

void heatmaps(CriticalFigures& figures, const CriticalScalingResult& r, const std::string& dir) {
  const auto& c = r.config;
  const auto rho_edges = edges(c.rho, false);
  for (size_t in = 0; in < r.N; ++in)
    for (size_t id = 0; id < r.D; ++id) {
      const int64_t n = c.n[in], d = c.d[id];
      Csv csv;
      csv.header = {"rho",    "gamma", "rho_lo",      "rho_hi",  "gamma_lo", "gamma_hi",
                    "lambda", "eta",   "self_weight", "entropy", "c_out",    "c_in",
                    "lambda_oracle",   "eta_se"};
      double y_min = std::numeric_limits<double>::infinity(), y_max = 0;
      double scale = std::numeric_limits<double>::infinity();  // the smallest γ > 0
      for (const double g : r.gamma)
        if (g > 0) scale = std::min(scale, g);
      if (!std::isfinite(scale)) scale = 1;
      for (size_t ir = 0; ir < r.R; ++ir) {
        const std::vector<double> gammas(r.gamma.begin() + long(ir * r.G),
                                         r.gamma.begin() + long((ir + 1) * r.G));
        const auto gamma_edges = asinh_edges(gammas, scale);
        for (size_t ig = 0; ig < r.G; ++ig) {
          const size_t k = r.at(in, id, ir, ig);
          const auto [g_lo, g_hi] = gamma_edges[ig];
          if (std::isfinite(g_lo)) y_min = std::min(y_min, g_lo);
          if (std::isfinite(g_hi)) y_max = std::max(y_max, g_hi);
          csv.rows.push_back({c.rho[ir], gammas[ig], rho_edges[ir].first, rho_edges[ir].second,
                              g_lo, g_hi, r.lambda[k], r.eta[k], r.self_weight[k], r.entropy[k],
                              r.c_out[k], r.c_in[r.cell(in, id, ir)],
                              r.oracle_lambda[r.oracle_at(in, ir, ig)], r.eta_se[k]});
        }
      }
      const std::string data = fmt::format("critical_{}.csv", cell_label(n, d));
      write_csv((fs::path(dir) / data).string(), csv);
      figures.files.push_back((fs::path(dir) / data).string());
      if (!(y_max > 0)) continue;  // a single γ = 0 row: nothing to draw

      // Overlays: theory γ = 1/(1−ρ) (a function), 1/(1−c_in) and γ̂_c (columns of the γ̂_c CSV).
      const std::string gamma_c_csv = fmt::format("critical_gamma_c_n{}.csv", n);
      const size_t base = 3 + 3 * id;  // c_in, 1/(1−c_in), γ̂_c of this d
      const std::string common = fmt::format(
          "set encoding utf8\n"
          "set xlabel 'ρ (cosine of the token model)'\n"
          "set ylabel 'γ   (logits scaled by β = γ·ln n; asinh axis: γ = 0 at the bottom)'\n"
          "set nonlinear y via asinh(y/{2}) inverse {2}*sinh(y)\n"
          "{5}"
          "set xrange [{0}:{1}]\n"
          "set yrange [{3}:{4}]\n"
          "set key inside left top opaque box\n"
          "set grid front\n"
          "{6}",
          number(rho_edges.front().first), number(rho_edges.back().second), number(scale), number(std::min(y_min, 0.0)),
          number(y_max), asinh_tics(scale, y_max), kPalette);
      const std::string overlays = fmt::format(
          ", \\\n  1/(1-x) with lines lw 3 lc rgb '#e41a1c' title 'γ = 1/(1−ρ)'"
          ", \\\n  {0} using 1:($1 > 0 ? ${2} : 1/0) with lines lw 2 dt 2 lc rgb 'black' "
          "title '1/(1−c_{{in}})'"
          ", \\\n  {0} using 1:{3} with points pt 7 ps 1.2 lc rgb 'white' notitle"
          ", \\\n  {0} using 1:{3} with points pt 6 ps 1.2 lc rgb 'black' title 'measured γ̂_c (A_{{ii}} = ½)'"
          ", \\\n  {0} using 1:(valid({4}) ? {5} : 1/0) with points pt 8 ps 1.4 lc rgb 'black' "
          "title 'γ̂_c beyond the γ grid (at the top edge; value in the CSV)'",
          gnuplot_quote(gamma_c_csv), base, base + 1, in_grid_column(r, id), beyond_column(r, id),
          number(y_max));
      const std::string boxes = fmt::format(
          "plot {} using 1:2:3:4:5:6:{{}} with boxxyerror fs solid 1.0 noborder fc palette notitle",
          gnuplot_quote(data));
      add_render(figures, dir, fmt::format("critical_lambda_{}", cell_label(n, d)),
                 common + fmt::format("set title 'λ = arccos(c_{{out}}) / arccos(c_{{in}}):  n = {}, "
                                      "d = {}   (0: collapse, 1: identity)'\n"
                                      "set cbrange [0:1]\nset cblabel 'λ'\n",
                                      n, d) +
                     fmt::format(fmt::runtime(boxes), 7) + overlays);
      add_render(figures, dir, fmt::format("critical_eta_{}", cell_label(n, d)),
                 common + fmt::format("set title 'η = ‖∂Y′/∂Y‖²_F / (n·d):  n = {}, d = {}   "
                                      "(identity phase: (d−1)/d = {:.3g})'\n"
                                      "set cbrange [0:*]\nset cblabel 'η'\n",
                                      n, d, double(d - 1) / double(d)) +
                     fmt::format(fmt::runtime(boxes), 8) + overlays);
    }
}

void gamma_c_figures(CriticalFigures& figures, const CriticalScalingResult& r, const std::string& dir) {
  const auto& c = r.config;
  for (size_t in = 0; in < r.N; ++in) {
    Csv csv;
    csv.header = {"rho", "gamma_c_theory"};
    for (const int64_t d : c.d)
      for (const char* what : {"c_in", "gamma_c_c_in", "gamma_c_hat"})
        csv.header.push_back(fmt::format("{}_d{}", what, d));
    for (const int64_t d : c.d)
      for (const char* what : {"gamma_c_hat_in_grid", "gamma_c_hat_beyond_grid"})
        csv.header.push_back(fmt::format("{}_d{}", what, d));
    for (size_t ir = 0; ir < r.R; ++ir) {
      std::vector<double> row = {c.rho[ir], 1.0 / (1.0 - c.rho[ir])};
      for (size_t id = 0; id < r.D; ++id) {
        const size_t cell = r.cell(in, id, ir);
        row.push_back(r.c_in[cell]);
        row.push_back(1.0 / (1.0 - r.c_in[cell]));
        row.push_back(r.gamma_c_hat[cell]);
      }
      for (size_t id = 0; id < r.D; ++id) {
        const size_t cell = r.cell(in, id, ir);
        const bool in_grid = r.gamma_c_in_grid[cell] != 0;
        row.push_back(in_grid ? r.gamma_c_hat[cell] : kNaN);
        row.push_back(in_grid ? kNaN : r.gamma_c_hat[cell]);
      }
      csv.rows.push_back(row);
    }
    const int64_t n = c.n[in];
    // The frame ends a little above the γ grid: γ̂_c beyond it is drawn at the top edge, marked.
    double top = 0;
    for (const double g : r.gamma) top = std::max(top, g);
    top *= 1.5;
    const std::string data = fmt::format("critical_gamma_c_n{}.csv", n);
    write_csv((fs::path(dir) / data).string(), csv);
    figures.files.push_back((fs::path(dir) / data).string());
    std::string body = fmt::format(
        "set encoding utf8\n"
        "set title 'critical γ: measured γ̂_c (mean A_{{ii}} = ½) against theory, n = {}'\n"
        "set xlabel 'ρ (cosine of the token model)'\n"
        "set ylabel 'γ_c   (logits scaled by β = γ·ln n)'\n"
        "set logscale y\n"
        "set xrange [{}:{}]\n"
        "set yrange [*:{}]\n"
        "set key below box opaque maxcols 2\n"
        "plot 1/(1-x) with lines lw 3 lc rgb '#e41a1c' title '1/(1−ρ)'",
        n, number(c.rho.front() - 0.025), number(c.rho.back() + 0.025), number(top));
    const char* colours[] = {"#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#882255"};
    for (size_t id = 0; id < r.D; ++id) {
      const size_t base = 3 + 3 * id;
      const char* colour = colours[id % 6];
      body += fmt::format(
          ", \\\n  {0} using 1:{1} with points pt {3} ps 1.3 lc rgb '{4}' title 'γ̂_c, d = {5}'"
          ", \\\n  {0} using 1:(valid({6}) ? {7} : 1/0) with points pt 8 ps 1.5 lc rgb '{4}' "
          "title 'γ̂_c beyond the grid, d = {5} (at the top)'"
          ", \\\n  {0} using 1:{2} with lines dt 2 lw 1.5 lc rgb '{4}' title '1/(1−c_{{in}}), d = {5}'",
          gnuplot_quote(data), in_grid_column(r, id), base + 1, 5 + 2 * int(id % 4), colour, c.d[id],
          beyond_column(r, id), number(top));
    }
    add_render(figures, dir, fmt::format("critical_gamma_c_n{}", n), body);
  }
}

void causal_figures(CriticalFigures& figures, const CriticalScalingResult& r, const std::string& dir) {
  const auto& c = r.config;
  size_t half = 0;  // the ρ nearest ½
  for (size_t ir = 1; ir < r.R; ++ir)
    if (std::fabs(c.rho[ir] - 0.5) < std::fabs(c.rho[half] - 0.5)) half = ir;
  for (size_t in = 0; in < r.N; ++in)
    for (size_t id = 0; id < r.D; ++id) {
      const int64_t n = c.n[in], d = c.d[id];
      Csv csv;
      csv.header = {"rho", "gamma", "gamma_times_1_minus_rho", "per_row_collapse", "per_row_critical",
                    "per_row_identity", "global_collapse", "global_critical", "global_identity",
                    "per_row_self_weight", "global_self_weight"};
      for (size_t ir = 0; ir < r.R; ++ir)
        for (size_t ig = 0; ig < r.G; ++ig) {
          const size_t k = r.at(in, id, ir, ig);
          const double gamma = r.gamma[ir * r.G + ig];
          std::vector<double> row = {c.rho[ir], gamma, gamma * (1.0 - c.rho[ir])};
          for (size_t sc = 0; sc < 2; ++sc)
            for (size_t phase = 0; phase < 3; ++phase)
              row.push_back(r.causal_fraction[(k * 2 + sc) * 3 + phase]);
          row.push_back(r.causal_self_weight[k * 2]);
          row.push_back(r.causal_self_weight[k * 2 + 1]);
          csv.rows.push_back(row);
        }
      const std::string data = fmt::format("critical_causal_{}.csv", cell_label(n, d));
      write_csv((fs::path(dir) / data).string(), csv);
      figures.files.push_back((fs::path(dir) / data).string());
      const std::string rho = number(c.rho[half]);
      std::string body = fmt::format(
          "set encoding utf8\n"
          "set title 'causal attention, fraction of rows per phase: n = T = {}, d = {}, ρ = {}'\n"
          "set xlabel 'γ·(1−ρ) = γ/γ_c'\n"
          "set ylabel 'fraction of rows  (phase from A_{{ii}}: < {} collapse, > {} identity)'\n"
          "set yrange [0:1.02]\n"
          "set key inside right center box opaque\n"
          "plot ",
          n, d, rho, number(c.collapse_below), number(c.identity_above));
      const char* phase_names[] = {"collapse", "critical", "identity"};
      const char* colours[] = {"#377eb8", "#e41a1c", "#4daf4a"};
      std::vector<std::string> lines;
      for (int phase = 0; phase < 3; ++phase)
        for (int sc = 0; sc < 2; ++sc)
          lines.push_back(fmt::format(
              "{} using 3:($1 == {} ? ${} : 1/0) with linespoints lw 2 pt {} dt {} lc rgb '{}' "
              "title '{}, {}'",
              gnuplot_quote(data), rho, 4 + 3 * sc + phase, sc == 0 ? 7 : 6, sc == 0 ? 1 : 2,
              colours[phase], phase_names[phase], sc == 0 ? "per-row γ·ln(i+1)" : "global γ·ln T"));
      for (size_t k = 0; k < lines.size(); ++k) body += (k ? ", \\\n  " : "") + lines[k];
      add_render(figures, dir, fmt::format("critical_causal_{}", cell_label(n, d)), body);
    }
}

void trained_figure(CriticalFigures& figures, const std::vector<TrainedLognReport>& trained,
                    const std::string& dir) {
  if (trained.empty()) return;
  Csv csv;
  csv.text_header = {"run"};
  csv.header = {"layer", "head", "key_cosine_rotated", "gamma_eff", "gamma_c_rotated", "key_cosine",
                "gamma_c", "scale"};
  for (const auto& t : trained)
    for (const auto& h : t.table) {
      csv.text_rows.push_back({t.name});
      csv.rows.push_back({double(h.layer), double(h.head), h.key_cosine_rotated, h.gamma_eff,
                          h.gamma_c_rotated, h.key_cosine, h.gamma_c, h.scale});
    }
  const std::string data = "critical_trained.csv";
  write_csv((fs::path(dir) / data).string(), csv);
  figures.files.push_back((fs::path(dir) / data).string());
  double gamma_max = 0;
  for (const auto& row : csv.rows) gamma_max = std::max(gamma_max, row[3]);
  // Each head twice: its keys as the kernel sees them (after any rotary encoding) and its content
  // keys (before it), joined by a line; the same for methods without rotary encoding.
  const std::string body = fmt::format(
      "set encoding utf8\n"
      "set title 'trained LogN heads: effective γ = s_h·scale·D against their mean key cosine'\n"
      "set xlabel 'c_k: mean pairwise cosine of the keys of a head over the positions of a window'\n"
      "set ylabel 'γ_{{eff}}   (logit = γ_{{eff}}·ln(i+1)·cos(q, k))'\n"
      "set logscale y\n"
      "set xrange [0:1]\n"
      "set yrange [0.8:{0}]\n"
      "set key inside left top box opaque\n"
      "plot 1/(1-x) with lines lw 3 lc rgb '#e41a1c' title 'γ_c = 1/(1−c_k)', \\\n"
      "  {1} using 4:5:($7-$4):(0) with vectors nohead dt 3 lc rgb '#999999' notitle, \\\n"
      "  {1} using 4:5 with points pt 7 ps 1.4 lc rgb '#377eb8' title 'keys the kernel sees (after any rotary encoding)', \\\n"
      "  {1} using 7:5 with points pt 6 ps 1.4 lc rgb '#377eb8' title 'content keys (before it)'",
      number(std::max(10.0, 2 * gamma_max)), gnuplot_quote(data));
  add_render(figures, dir, "critical_trained", body);
}

}  // namespace

std::string format_gamma_c_table(const CriticalScalingResult& r) {
  const auto& c = r.config;
  std::string out;
  for (size_t id = 0; id < r.D; ++id) {
    out += fmt::format("d = {}\n\n| ρ | 1/(1−ρ) |", c.d[id]);
    std::string rule = "|---:|---:|";
    for (const int64_t n : c.n) {
      out += fmt::format(" c_in (n={0}) | 1/(1−c_in) | γ̂_c (n={0}) |", n);
      rule += "---:|---:|---:|";
    }
    out += "\n" + rule + "\n";
    for (size_t ir = 0; ir < r.R; ++ir) {
      out += fmt::format("| {:.2f} | {:.3f} |", c.rho[ir], 1.0 / (1.0 - c.rho[ir]));
      for (size_t in = 0; in < r.N; ++in) {
        const size_t cell = r.cell(in, id, ir);
        const double g = r.gamma_c_hat[cell];
        const std::string hat = std::isnan(g) ? "—"
                                : r.gamma_c_in_grid[cell] ? fmt::format("{:.3f}", g)
                                                          : fmt::format("{:.4g}*", g);
        out += fmt::format(" {:.4f} | {:.3f} | {} |", r.c_in[cell], 1.0 / (1.0 - r.c_in[cell]), hat);
      }
      out += "\n";
    }
    out += "\n";
  }
  out += "γ̂_c: the γ where the mean self-weight A_ii crosses ½; * beyond the γ grid, — never reached.\n";
  return out;
}

CriticalFigures export_critical_scaling_figures(const std::string& h5_path, const std::string& out_dir) {
  const auto file = read_critical_scaling_file(h5_path);
  fs::create_directories(out_dir);
  // render_gnuplot forks, and its child reopens stdout (flushing what it inherited): flush first,
  // or whatever the caller printed and has not flushed yet comes out once per figure.
  std::fflush(nullptr);
  CriticalFigures figures;
  // γ̂_c CSVs first: the heatmaps overlay them.
  gamma_c_figures(figures, file.result, out_dir);
  heatmaps(figures, file.result, out_dir);
  causal_figures(figures, file.result, out_dir);
  trained_figure(figures, file.trained, out_dir);
  figures.gamma_c_table = format_gamma_c_table(file.result);
  const std::string table_path = (fs::path(out_dir) / "critical_gamma_c.md").string();
  harness::write_file_atomically(table_path, "# Critical γ: measured γ̂_c against 1/(1−ρ) and 1/(1−c_in)\n\nfrom " +
                                                 h5_path + "\n\n" + figures.gamma_c_table);
  figures.files.push_back(table_path);
  return figures;
}

}  // namespace analysis
