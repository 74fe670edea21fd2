// The mean of samples and its standard error, sample sd / √n (n − 1 in the variance), NaN for a
// single sample: the one rule of every table, figure and validation s.e. in the harness.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace harness {

struct MeanSe {
  double mean = std::nan("");
  double se = std::nan("");  // NaN when n < 2
  size_t n = 0;
};

inline MeanSe mean_se(const std::vector<double>& v) {
  MeanSe out;
  out.n = v.size();
  if (v.empty()) return out;
  double mean = 0, ss = 0;
  for (const double x : v) mean += x / double(v.size());
  for (const double x : v) ss += (x - mean) * (x - mean);
  out.mean = mean;
  if (v.size() > 1) out.se = std::sqrt(ss / double(v.size() - 1) / double(v.size()));
  return out;
}

}  // namespace harness
