#include "analysis/theory/critical_scaling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <thread>

namespace analysis {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean and standard error of the mean of a (m) tensor of per-row values, with the finite
// population correction for m rows sampled without replacement out of n.
Estimate mean_and_se(const torch::Tensor& values, int64_t n) {
  const int64_t m = values.size(0);
  const auto v = values.to(torch::kFloat64);
  Estimate e;
  e.value = v.mean().item<double>();
  if (m > 1 && n > 1) {
    const double fpc = std::sqrt(std::max(0.0, 1.0 - double(m - 1) / double(n - 1)));
    e.se = v.std().item<double>() / std::sqrt(double(m)) * fpc;
  }
  return e;
}

// splitmix64: one step of its sequence, which mixes every input bit into every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double logit(double p) { return std::log(p) - std::log1p(-p); }

}  // namespace

uint64_t cell_seed(uint64_t seed, int64_t n, int64_t d, double rho, int64_t trial, uint64_t stream) {
  uint64_t rho_bits = 0;
  std::memcpy(&rho_bits, &rho, sizeof rho_bits);
  uint64_t h = mix(seed);
  for (const uint64_t v : {uint64_t(n), uint64_t(d), rho_bits, uint64_t(trial), stream})
    h = mix(h ^ v);
  return h;
}

// ---- tokens -------------------------------------------------------------------------------------

torch::Tensor correlated_tokens(int64_t n, int64_t d, double rho, at::Generator& generator,
                                torch::ScalarType dtype) {
  if (n < 1 || d < 1 || !(rho >= 0 && rho < 1))
    throw std::invalid_argument("correlated_tokens: need n, d >= 1 and rho in [0, 1)");
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  // Drawn in float64 whatever `dtype`, so float32 and float64 runs see the same tokens.
  auto z0 = at::randn({1, d}, generator, f64);                  // (1, d)
  z0 = z0 * (std::sqrt(double(d)) / z0.norm().item<double>());  // |z_0| = √d
  const auto z = at::randn({n, d}, generator, f64);             // (n, d)
  const auto x = std::sqrt(rho) * z0 + std::sqrt(1.0 - rho) * z;
  return (x / x.norm(2, 1, true)).to(dtype);
}

torch::Tensor equiangular_tokens(int64_t n, double rho, torch::ScalarType dtype) {
  if (n < 1 || !(rho >= 0 && rho < 1))
    throw std::invalid_argument("equiangular_tokens: need n >= 1 and rho in [0, 1)");
  auto y = torch::zeros({n, n + 1}, torch::TensorOptions().dtype(torch::kFloat64));
  y.select(1, 0).fill_(std::sqrt(rho));
  y.narrow(1, 1, n).diagonal().fill_(std::sqrt(1.0 - rho));
  return y.to(dtype);
}

double mean_pairwise_cosine(const torch::Tensor& y) {
  torch::NoGradGuard no_grad;
  const auto y64 = y.to(torch::kFloat64);
  const int64_t n = y64.size(0);
  if (n < 2) return kNaN;
  const double total = y64.sum(0).pow(2).sum().item<double>();  // |Σ y_i|²
  const double diagonal = y64.pow(2).sum().item<double>();      // Σ |y_i|²
  return (total - diagonal) / (double(n) * double(n - 1));
}

// ---- the oracle ---------------------------------------------------------------------------------

EquiangularOracle equiangular_oracle(int64_t n, double rho, double gamma) {
  const double nn = double(n);
  // t = (n−1)·n^(−γ(1−ρ)); a = 1/(1+t), 1 − a = t/(1+t) (kept apart: 1 − a cancels near a = 1).
  const double t = std::exp(std::log(nn - 1.0) - gamma * (1.0 - rho) * std::log(nn));
  const double a = 1.0 / (1.0 + t);
  const double b = t / (1.0 + t) / (nn - 1.0);
  const double c = a - b;
  const double s1 = 1.0 + (nn - 1.0) * rho;
  const double s2 = nn + nn * (nn - 1.0) * rho;
  const double shared = 2.0 * c * b * s1 + b * b * s2;
  return {a, (c * c * rho + shared) / (c * c + shared)};
}

double angle_ratio(double c_out, double c_in) {
  return std::acos(std::clamp(c_out, -1.0, 1.0)) / std::acos(std::clamp(c_in, -1.0, 1.0));
}

// ---- one step -----------------------------------------------------------------------------------

torch::Tensor attention_step_rows(const torch::Tensor& y, const torch::Tensor& rows, double beta) {
  const auto queries = y.index_select(0, rows);                   // (m, d)
  const auto weights = torch::softmax(beta * queries.mm(y.t()), 1);  // (m, n)
  const auto mixed = weights.mm(y);                               // (m, d)
  return mixed / mixed.norm(2, 1, true);                          // (m, d)
}

StepSampler::StepSampler(torch::Tensor y, int64_t rows) : y_(std::move(y)) {
  torch::NoGradGuard no_grad;
  const int64_t m = std::min<int64_t>(rows, y_.size(0));
  cosines_ = y_.narrow(0, 0, m).mm(y_.t());  // (m, n)
  rows_c_in_ = mean_pairwise_cosine(y_.narrow(0, 0, m));
}

StepStatistics StepSampler::statistics(double beta) const {
  torch::NoGradGuard no_grad;
  const int64_t m = rows(), n_keys = n();
  const auto log_weights = torch::log_softmax(beta * cosines_, 1);  // (m, n)
  const auto weights = log_weights.exp();                           // (m, n)
  StepStatistics s;
  const auto self = mean_and_se(weights.diagonal(), n_keys);  // A_ii, i < m (query i is token i)
  s.self_weight = self.value;
  s.self_weight_se = self.se;
  const auto entropy = mean_and_se(-(weights * log_weights).sum(1) / std::log(double(n_keys)), n_keys);
  s.entropy = entropy.value;
  s.entropy_se = entropy.se;

  auto out = weights.mm(y_);                     // (m, d)
  out = (out / out.norm(2, 1, true)).to(torch::kFloat64);
  // r_i = mean cosine of row i to the other m − 1 sampled rows; c_out = mean r_i (a U-statistic:
  // unbiased for the mean over all n(n−1) pairs of outputs).
  const auto total = out.sum(0);                 // (d)
  const auto self_dot = out.pow(2).sum(1);       // (m) |y'_i|² (1 up to rounding)
  const auto r = (out.mv(total) - self_dot) / double(m - 1);  // (m)
  s.c_out = r.mean().item<double>();
  if (m > 2) {
    const double fpc = std::sqrt(std::max(0.0, 1.0 - double(m - 1) / double(n_keys - 1)));
    s.c_out_se = 2.0 * r.std().item<double>() / std::sqrt(double(m)) * fpc;
  }
  return s;
}

double StepSampler::mean_self_weight(double beta) const {
  torch::NoGradGuard no_grad;
  const auto logits = beta * cosines_;  // (m, n)
  const auto self = logits.diagonal() - torch::logsumexp(logits, 1);
  return self.exp().to(torch::kFloat64).mean().item<double>();
}

// ---- Hutchinson ---------------------------------------------------------------------------------

Estimate jacobian_norm_hutchinson(const torch::Tensor& y, double beta, int64_t rows,
                                  int64_t probes, at::Generator& generator) {
  if (probes < 1 || rows < 1) throw std::invalid_argument("jacobian_norm_hutchinson: rows, probes >= 1");
  torch::AutoGradMode grad_on(true);
  const int64_t n = y.size(0), d = y.size(1), m = std::min(rows, n);
  const auto leaf = y.detach().clone().requires_grad_(true);  // (n, d)
  const auto index_options = torch::TensorOptions().dtype(torch::kLong);
  std::vector<double> samples;
  samples.reserve(size_t(probes));
  for (int64_t p = 0; p < probes; ++p) {
    // This probe's rows: a block of m consecutive tokens (i.i.d. tokens: a uniform sample).
    const auto rows_p = (torch::arange(m, index_options) + (p * m) % n).remainder(n);  // (m)
    const auto out = attention_step_rows(leaf, rows_p, beta);                         // (m, d)
    // Rademacher signs, drawn in float64 from the generator whatever the dtype.
    const auto signs =
        at::randn({m, d}, generator, torch::TensorOptions().dtype(torch::kFloat64)).sign().to(y.scalar_type());
    const auto vjp = torch::autograd::grad({out}, {leaf}, {signs})[0];  // (n, d) = J_Rᵀ v
    samples.push_back(vjp.to(torch::kFloat64).pow(2).sum().item<double>() / double(m * d));
  }
  Estimate e;
  for (double s : samples) e.value += s;
  e.value /= double(samples.size());
  if (samples.size() > 1) {
    double var = 0;
    for (double s : samples) var += (s - e.value) * (s - e.value);
    var /= double(samples.size() - 1);
    e.se = std::sqrt(var / double(samples.size()));
  }
  return e;
}

// ---- γ̂_c ----------------------------------------------------------------------------------------

CriticalGamma critical_gamma(const std::vector<const StepSampler*>& samplers,
                             const std::vector<double>& grid_gamma,
                             const std::vector<double>& grid_self_weight) {
  if (samplers.empty() || grid_gamma.size() != grid_self_weight.size() || grid_gamma.empty())
    throw std::invalid_argument("critical_gamma: need samplers and a grid with its self-weights");
  const double log_n = std::log(double(samplers.front()->n()));
  const auto mean_self_weight = [&](double gamma) {
    double sum = 0;
    for (const auto* s : samplers) sum += s->mean_self_weight(gamma * log_n);
    return sum / double(samplers.size());
  };
  CriticalGamma out;
  // The bracket: the first grid point at or above ½, with the point before it (γ = 0, where
  // A_ii = 1/n, when the grid starts above the crossing).
  double lo = 0, w_lo = 1.0 / double(samplers.front()->n()), hi = kNaN, w_hi = kNaN;
  for (size_t k = 0; k < grid_gamma.size(); ++k) {
    if (grid_self_weight[k] >= 0.5) {
      hi = grid_gamma[k];
      w_hi = grid_self_weight[k];
      out.bracketed_in_grid = true;
      break;
    }
    lo = grid_gamma[k];
    w_lo = grid_self_weight[k];
  }
  if (w_lo >= 0.5) return {lo, true};  // n = 2 at γ = 0
  if (!out.bracketed_in_grid) {
    // Beyond the grid: double γ until A_ii reaches ½ (d = 2 needs far more than 1/(1−ρ)).
    double g = std::max(lo, 1e-3);
    for (int k = 0; k < 20 && std::isnan(hi); ++k) {
      const double next = 2 * g;
      const double w = mean_self_weight(next);
      if (w >= 0.5) {
        hi = next;
        w_hi = w;
      } else {
        lo = next;
        w_lo = w;
      }
      g = next;
    }
    if (std::isnan(hi)) return {kNaN, false};
  }
  if (w_hi == 0.5) return {hi, out.bracketed_in_grid};
  // Regula falsi (Illinois) on f = logit(A_ii) over [lo, hi], f(lo) < 0 <= f(hi); bisection when
  // a logit is not finite (A_ii rounds to 0 or 1 at extreme β).
  double f_lo = logit(w_lo), f_hi = logit(w_hi);
  int side = 0;
  for (int it = 0; it < 200 && hi - lo > 1e-9 * hi; ++it) {
    double g = 0.5 * (lo + hi);
    if (std::isfinite(f_lo) && std::isfinite(f_hi) && f_hi > f_lo)
      g = std::clamp(hi - f_hi * (hi - lo) / (f_hi - f_lo), lo, hi);
    if (!(g > lo && g < hi)) g = 0.5 * (lo + hi);
    const double f = logit(mean_self_weight(g));
    if (f == 0) return {g, out.bracketed_in_grid};
    if (f < 0) {
      lo = g;
      f_lo = f;
      if (side == -1) f_hi *= 0.5;
      side = -1;
    } else {
      hi = g;
      f_hi = f;
      if (side == 1) f_lo *= 0.5;
      side = 1;
    }
  }
  out.gamma = 0.5 * (lo + hi);
  return out;
}

// ---- causal -------------------------------------------------------------------------------------

CausalSampler::CausalSampler(torch::Tensor y, int64_t rows) : T_(y.size(0)) {
  torch::NoGradGuard no_grad;
  const int64_t m = std::min<int64_t>(rows, T_);
  std::vector<int64_t> positions;
  for (int64_t k = 0; k < m; ++k) positions.push_back((2 * k + 1) * T_ / (2 * m));
  positions_ = torch::tensor(positions, torch::TensorOptions().dtype(torch::kLong));  // (m)
  cosines_ = y.index_select(0, positions_).mm(y.t());                                 // (m, T)
  const auto keys = torch::arange(T_, torch::TensorOptions().dtype(torch::kLong));
  const auto future = keys.unsqueeze(0) > positions_.unsqueeze(1);                    // (m, T)
  cosines_ = cosines_.masked_fill(future, -std::numeric_limits<double>::infinity());
  log_n_ = (positions_.to(torch::kFloat64) + 1).log().unsqueeze(1).to(y.scalar_type());  // (m, 1)
}

CausalPhases CausalSampler::phases(double gamma, double collapse_below, double identity_above) const {
  torch::NoGradGuard no_grad;
  CausalPhases out;
  const auto self_index = positions_.unsqueeze(1);  // (m, 1)
  for (const int scaling : {kPerRowScaling, kGlobalScaling}) {
    // β ≥ 0 keeps the masked −inf entries at −inf, except β = 0 (0·−inf = NaN): mask again.
    const auto beta = scaling == kPerRowScaling ? gamma * log_n_
                                                : torch::full_like(log_n_, gamma * std::log(double(T_)));
    auto logits = beta * cosines_;                                         // (m, T)
    logits = logits.masked_fill(torch::isinf(cosines_), -std::numeric_limits<double>::infinity());
    const auto self = (logits.gather(1, self_index).squeeze(1) - torch::logsumexp(logits, 1))
                          .exp()
                          .to(torch::kFloat64);                            // (m) A_ii
    const double m = double(self.size(0));
    const double collapse = (self < collapse_below).sum().item<double>() / m;
    const double identity = (self > identity_above).sum().item<double>() / m;
    out.fraction[scaling][kCollapse] = collapse;
    out.fraction[scaling][kIdentity] = identity;
    out.fraction[scaling][kCritical] = 1.0 - collapse - identity;
    out.self_weight[scaling] = self.mean().item<double>();
  }
  return out;
}

// ---- the grid -----------------------------------------------------------------------------------

namespace {

// The result's axes, and every measured array at its size, NaN until measured.
CriticalScalingResult empty_result(const CriticalScalingConfig& config, int threads) {
  CriticalScalingResult r;
  r.config = config;
  r.threads = threads;
  r.N = config.n.size();
  r.D = config.d.size();
  r.R = config.rho.size();
  r.G = config.gamma_points();
  const size_t cells = r.N * r.D * r.R, points = cells * r.G;
  for (size_t i = 0; i < r.R; ++i) {
    const auto g = config.gammas(i);
    r.gamma.insert(r.gamma.end(), g.begin(), g.end());
  }
  r.c_in.assign(cells, kNaN);
  for (auto* v : {&r.c_out, &r.c_out_se, &r.lambda, &r.self_weight, &r.self_weight_se, &r.entropy,
                  &r.entropy_se, &r.eta, &r.eta_se})
    v->assign(points, kNaN);
  r.gamma_c_hat.assign(cells, kNaN);
  r.gamma_c_in_grid.assign(cells, 0);
  r.causal_fraction.assign(points * 6, kNaN);
  r.causal_self_weight.assign(points * 2, kNaN);
  return r;
}

// The oracle at each (n, ρ, γ): the same γ grid, tokens exactly equiangular at cosine ρ.
void fill_oracle(CriticalScalingResult& r) {
  r.oracle_c_out.assign(r.N * r.R * r.G, kNaN);
  r.oracle_self_weight = r.oracle_lambda = r.oracle_c_out;
  for (size_t in = 0; in < r.N; ++in)
    for (size_t ir = 0; ir < r.R; ++ir)
      for (size_t ig = 0; ig < r.G; ++ig) {
        const auto o = equiangular_oracle(r.config.n[in], r.config.rho[ir], r.gamma[ir * r.G + ig]);
        const size_t k = r.oracle_at(in, ir, ig);
        r.oracle_c_out[k] = o.c_out;
        r.oracle_self_weight[k] = o.self_weight;
        r.oracle_lambda[k] = angle_ratio(o.c_out, r.config.rho[ir]);
      }
}

// One cell's (n, d, ρ) token draws, one per trial, with what each statistic samples from them.
struct CellTrials {
  std::vector<StepSampler> samplers;
  std::vector<CausalSampler> causal;
  std::vector<torch::Tensor> hutchinson_tokens;  // (n, d) in the Hutchinson dtype
  double c_in = 0;       // over all pairs
  double rows_c_in = 0;  // over the sampled rows (λ's, as c_out's)
};

CellTrials draw_cell(const CriticalScalingConfig& config, int64_t n, int64_t d, double rho,
                     torch::ScalarType dtype) {
  CellTrials c;
  const double trials = double(config.trials);
  for (int64_t t = 0; t < config.trials; ++t) {
    auto generator = at::detail::createCPUGenerator(cell_seed(config.seed, n, d, rho, t, 0));
    auto y = correlated_tokens(n, d, rho, generator, dtype);  // (n, d)
    c.c_in += mean_pairwise_cosine(y) / trials;
    c.samplers.emplace_back(y, config.rows);
    c.rows_c_in += c.samplers.back().rows_input_cosine() / trials;
    c.hutchinson_tokens.push_back(y.to(config.hutchinson_float64 ? torch::kFloat64 : torch::kFloat32));
    c.causal.emplace_back(y, config.causal_rows);
  }
  return c;
}

// Every statistic at one γ, averaged over the cell's trials (variances of the means summed).
void measure_point(CriticalScalingResult& r, const CellTrials& cell, size_t k, int64_t n, int64_t d,
                   double rho, double gamma) {
  const CriticalScalingConfig& config = r.config;
  const double trials = double(config.trials), log_n = std::log(double(n));
  double c_out = 0, c_out_var = 0, self = 0, self_var = 0, entropy = 0, entropy_var = 0;
  double eta = 0, eta_var = 0;
  double fraction[2][3] = {}, causal_self[2] = {};
  for (int64_t t = 0; t < config.trials; ++t) {
    const auto s = cell.samplers[size_t(t)].statistics(gamma * log_n);
    c_out += s.c_out / trials;
    c_out_var += s.c_out_se * s.c_out_se / (trials * trials);
    self += s.self_weight / trials;
    self_var += s.self_weight_se * s.self_weight_se / (trials * trials);
    entropy += s.entropy / trials;
    entropy_var += s.entropy_se * s.entropy_se / (trials * trials);
    uint64_t gamma_bits = 0;
    std::memcpy(&gamma_bits, &gamma, sizeof gamma_bits);
    auto generator = at::detail::createCPUGenerator(cell_seed(config.seed, n, d, rho, t, 1 + gamma_bits));
    const auto e = jacobian_norm_hutchinson(cell.hutchinson_tokens[size_t(t)], gamma * log_n,
                                            config.hutchinson_rows, config.hutchinson_probes, generator);
    eta += e.value / trials;
    eta_var += e.se * e.se / (trials * trials);
    const auto ph = cell.causal[size_t(t)].phases(gamma, config.collapse_below, config.identity_above);
    for (int sc = 0; sc < 2; ++sc) {
      causal_self[sc] += ph.self_weight[sc] / trials;
      for (int phase = 0; phase < 3; ++phase) fraction[sc][phase] += ph.fraction[sc][phase] / trials;
    }
  }
  r.c_out[k] = c_out;
  r.c_out_se[k] = std::sqrt(c_out_var);
  r.lambda[k] = angle_ratio(c_out, cell.rows_c_in);
  r.self_weight[k] = self;
  r.self_weight_se[k] = std::sqrt(self_var);
  r.entropy[k] = entropy;
  r.entropy_se[k] = std::sqrt(entropy_var);
  r.eta[k] = eta;
  r.eta_se[k] = std::sqrt(eta_var);
  for (int sc = 0; sc < 2; ++sc) {
    r.causal_self_weight[k * 2 + size_t(sc)] = causal_self[sc];
    for (int phase = 0; phase < 3; ++phase)
      r.causal_fraction[(k * 2 + size_t(sc)) * 3 + size_t(phase)] = fraction[sc][phase];
  }
}

}  // namespace

CriticalScalingResult run_critical_scaling(const CriticalScalingConfig& config,
                                           const std::function<void(const GridProgress&)>& progress) {
  torch::NoGradGuard no_grad;  // Hutchinson turns autograd back on for itself
  const int threads = config.threads > 0 ? int(config.threads)
                                         : int(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  const auto dtype = config.float64 ? torch::kFloat64 : torch::kFloat32;
  const auto start = std::chrono::steady_clock::now();
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  CriticalScalingResult r = empty_result(config, threads);
  fill_oracle(r);

  const auto cell_work = [](int64_t n, int64_t d) { return double(n) * double(d + 64); };
  GridProgress p;
  p.total = r.N * r.D * r.R;
  for (const int64_t n : config.n)
    for (const int64_t d : config.d) p.work_total += cell_work(n, d) * double(r.R);
  for (size_t in = 0; in < r.N; ++in)
    for (size_t id = 0; id < r.D; ++id)
      for (size_t ir = 0; ir < r.R; ++ir) {
        const int64_t n = config.n[in], d = config.d[id];
        const double rho = config.rho[ir];
        const size_t cell = r.cell(in, id, ir);
        const CellTrials trials = draw_cell(config, n, d, rho, dtype);
        r.c_in[cell] = trials.c_in;

        std::vector<double> grid_self_weight(r.G);
        for (size_t ig = 0; ig < r.G; ++ig) {
          const size_t k = r.at(in, id, ir, ig);
          measure_point(r, trials, k, n, d, rho, r.gamma[ir * r.G + ig]);
          grid_self_weight[ig] = r.self_weight[k];
        }
        std::vector<const StepSampler*> pointers;
        for (const auto& s : trials.samplers) pointers.push_back(&s);
        const std::vector<double> grid_gamma(r.gamma.begin() + long(ir * r.G),
                                             r.gamma.begin() + long((ir + 1) * r.G));
        const auto critical = critical_gamma(pointers, grid_gamma, grid_self_weight);
        r.gamma_c_hat[cell] = critical.gamma;
        r.gamma_c_in_grid[cell] = critical.bracketed_in_grid ? 1 : 0;

        ++p.done;
        p.work_done += cell_work(n, d);
        if (progress) {
          p.n = n;
          p.d = d;
          p.rho = rho;
          p.c_in = trials.c_in;
          p.gamma_c_hat = critical.gamma;
          p.seconds = seconds();
          progress(p);
        }
      }
  r.seconds = seconds();
  return r;
}

}  // namespace analysis
