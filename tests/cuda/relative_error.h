// The error measure the CUDA kernels' tests share (fused_attention_test.cu on a GPU,
// mma_layout_test.cpp's host emulation): plain C++, no CUDA.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace attention::cuda {

// max |got − want| / max(max |want|, floor); NaN (an element never written) counts as infinite.
// The floor keeps the measure finite where the exact value vanishes (dq, dk and dhead_scale are
// exactly 0 at T = 1).
template <class Got>
double relative_error(const std::vector<Got>& got, const std::vector<double>& want, double floor) {
  double max_diff = 0.0, max_want = 0.0;
  for (size_t n = 0; n < want.size(); ++n) {
    const double diff = std::fabs(double(got[n]) - want[n]);
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    max_want = std::max(max_want, std::fabs(want[n]));
  }
  return max_diff / std::max(max_want, floor);
}

}  // namespace attention::cuda
