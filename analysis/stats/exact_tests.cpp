#include "analysis/stats/exact_tests.h"

#include <boost/math/distributions/beta.hpp>
#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/chi_squared.hpp>
#include <boost/math/distributions/fisher_f.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace analysis::stats {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double log_choose(int64_t n, int64_t k) {
  return std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) - std::lgamma(double(n - k) + 1);
}

void check_level(double level) {
  if (!(level > 0 && level < 1)) throw std::invalid_argument("level must be in (0, 1)");
}

}  // namespace

double sign_test_p(int positive, int negative) {
  if (positive < 0 || negative < 0) throw std::invalid_argument("sign_test_p: negative count");
  const int n = positive + negative;
  if (n == 0) return 1.0;
  const boost::math::binomial_distribution<double> bin(double(n), 0.5);
  return std::min(1.0, 2 * boost::math::cdf(bin, double(std::min(positive, negative))));
}

double sample_sd(const double* x, int n) {
  if (n < 2) return kNaN;
  double mean = 0;
  for (int i = 0; i < n; ++i) mean += x[i] / double(n);
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  return std::sqrt(ss / double(n - 1));
}

Interval sd_interval(double s, int n, double level) {
  check_level(level);
  if (n < 2 || !std::isfinite(s)) return {kNaN, kNaN};
  const boost::math::chi_squared_distribution<double> chi2(double(n - 1));
  const double upper_q = boost::math::quantile(chi2, (1 + level) / 2);
  const double lower_q = boost::math::quantile(chi2, (1 - level) / 2);
  return {s * std::sqrt(double(n - 1) / upper_q), s * std::sqrt(double(n - 1) / lower_q)};
}

Interval sd_ratio_interval(double s_a, int n_a, double s_b, int n_b, double level) {
  check_level(level);
  if (n_a < 2 || n_b < 2 || !std::isfinite(s_a) || !std::isfinite(s_b) || !(s_b > 0)) return {kNaN, kNaN};
  const boost::math::fisher_f_distribution<double> f(double(n_a - 1), double(n_b - 1));
  const double ratio = s_a / s_b;
  return {ratio / std::sqrt(boost::math::quantile(f, (1 + level) / 2)),
          ratio / std::sqrt(boost::math::quantile(f, (1 - level) / 2))};
}

double hypergeometric_table_probability(int64_t a, int64_t b, int64_t c, int64_t d) {
  if (a < 0 || b < 0 || c < 0 || d < 0) throw std::invalid_argument("a 2×2 table needs counts ≥ 0");
  const int64_t r1 = a + b, r2 = c + d, c1 = a + c, n = r1 + r2;
  return std::exp(log_choose(r1, a) + log_choose(r2, c) - log_choose(n, c1));
}

double fisher_exact_p(int64_t a, int64_t b, int64_t c, int64_t d) {
  const double observed = hypergeometric_table_probability(a, b, c, d);
  const int64_t r1 = a + b, r2 = c + d, c1 = a + c;
  double p = 0;
  for (int64_t x = std::max<int64_t>(0, c1 - r2); x <= std::min(r1, c1); ++x) {
    const double px = hypergeometric_table_probability(x, r1 - x, c1 - x, r2 - (c1 - x));
    if (px <= observed * (1 + 1e-7)) p += px;
  }
  return std::min(1.0, p);
}

Interval clopper_pearson(int64_t k, int64_t n, double level) {
  check_level(level);
  if (n < 1 || k < 0 || k > n) throw std::invalid_argument("clopper_pearson: needs 0 ≤ k ≤ n, n ≥ 1");
  const double alpha = 1 - level;
  Interval out{0, 1};
  if (k > 0) out.lo = boost::math::quantile(boost::math::beta_distribution<double>(double(k), double(n - k + 1)), alpha / 2);
  if (k < n) out.hi = boost::math::quantile(boost::math::beta_distribution<double>(double(k + 1), double(n - k)), 1 - alpha / 2);
  return out;
}

}  // namespace analysis::stats
