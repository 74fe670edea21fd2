// The gnuplot layer of `harness export curves`: series of samples (mean ± s.e. over seeds or
// trials) as CSV columns, their styles and plot clauses, and the writer that puts a figure's CSVs,
// script and pictures in place (analysis/export/plot.h renders). The run figures
// (run_figures.h) and the theory figures (analysis/theory/theory_figures.h) draw through it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/export/plot.h"
#include "analysis/export/plot_style.h"
#include "results/dataset_group.h"

namespace analysis {

struct FigureFiles {
  std::string name;
  std::vector<std::string> csv;
  RenderResult render;
};

struct CurvesResult {
  std::vector<FigureFiles> figures;
  std::vector<std::string> notes;   // figures not drawn and why; unreadable files
  std::vector<std::string> tables;  // markdown tables that come with the figures (γ̂_c)
};

// One line of a figure: samples (one per seed) at each x. `group` picks its colour (the palette's
// run group or theory transform), `variant` its dash and point type (Δ, band, layer, context).
struct Series {
  std::string title;
  std::map<double, std::vector<double>> at;
  std::string color;
  size_t variant = 0;
  bool theory = false;                // dashed, whatever the variant
  std::map<double, double> given_se;  // a standard error known exactly (theory): used instead
  std::string legend;                 // the key's text when not the column header (small panels)
};

// x, then "<title>" (the mean over samples) and "<title> se" (its standard error: the given one,
// else over samples; empty for a single sample) per series: gnuplot's legend shows the mean
// column's header.
Csv series_csv(const std::string& x_name, const std::vector<Series>& series);
// The largest number of samples (seeds) behind any point of the figure.
size_t max_samples(const std::vector<Series>& series);
// "mean ± s.e. over 3 seeds" or "1 seed, no error bars": what a figure's error bars are.
std::string seeds_note(const std::vector<Series>& series);
SeriesStyle style_of(const Series& s);
// One clause per series of `file` (columns: x = 1, mean = 2 + 2i, se = 3 + 2i), each with its
// own colour, dash and point type. `with`: "yerrorlines" and "yerrorbars" draw the se column
// (0 where it is empty); anything else draws the mean only. `x`: the x column expression.
// `keep`: only the series it accepts (one panel of small multiples); all when null.
std::string series_clauses(const std::string& file, const std::vector<Series>& series, const std::string& with,
                           const std::string& x = "1", const std::function<bool(const Series&)>& keep = nullptr);
// Title (a second line after "\n" says what the error bars are), axis labels and log scales.
std::string axes(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 bool logx, bool logy = false);
// Series by title, in first-seen order; a new one takes `color` and `variant`.
Series& series_for(std::vector<Series>& all, const std::string& title, const std::string& color = "",
                   size_t variant = 0);

// The groups of a `harness theory entropy` file (one per transform), as the theory figures draw
// them and the run figures overlay them; an attribute of one as text ("" when absent).
using TheoryGroups = std::vector<std::pair<std::string, results::DatasetGroup>>;
std::string group_attribute(const results::DatasetGroup& g, const std::string& name);

// Writes a figure's CSVs and gnuplot script into `dir`, renders it, and records it in `out`.
struct Writer {
  std::string dir;
  CurvesResult& out;
  Palette palette;

  void figure(const std::string& name, const std::vector<std::pair<std::string, Csv>>& csvs,
              const std::string& body);
};

}  // namespace analysis
