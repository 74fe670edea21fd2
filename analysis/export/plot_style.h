// How a series looks, decided once for every figure of an export so that one thing has one look:
// colour says what a figure compares (a run group — method, τ — or a theory transform), dash and
// point type say the secondary key (Δ, band, layer, context, seed). Colours are colour-blind safe
// (Okabe–Ito without yellow, then Tol's muted set); the baselines have fixed colours (rope is the
// same blue in every figure); theory is always dashed.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace analysis {

struct SeriesStyle {
  std::string color;  // "#0072B2"
  int dash = 1;       // gnuplot dash type: 1 solid, 2 dashed, ...
  int point = 7;      // gnuplot point type: 7 filled circle, ...
  // "lc rgb '#0072B2' dt 1 pt 7 lw 1.5"
  std::string clause() const;
};

// The k-th secondary look (k = 0: solid line, filled circle); theory's points are open.
int dash_type(size_t k);
int point_type(size_t k);
int open_point_type(size_t k);

class Palette {
 public:
  // The colour of a run group's label ("method=rope", "tau=L/400 method=si+p-rope"): a fixed one
  // for a label that is one method preset, else the next free colour in first-asked order; the
  // same label gets the same colour in every figure drawn with this palette.
  std::string group_color(const std::string& group);
  // The colour of a theory transform: grey for standard attention, brown for LogN, and for
  // scale-invariant attention the colour of `match` (the run group with the same τ) when given,
  // else its own.
  std::string theory_color(const std::string& kind, const std::string& name, const std::string& match = "");

 private:
  std::map<std::string, std::string> assigned_;
  std::vector<std::string> used_;
};

}  // namespace analysis
