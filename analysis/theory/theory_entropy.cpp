#include "analysis/theory/theory_entropy.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "attention/method.h"
#include "attention/score_mod.h"
#include "attention/statistics.h"
#include "attention/transforms.h"
#include "results/attention_group.h"
#include "results/hdf5_io.h"

namespace analysis {

namespace {

// Running mean and standard error (Welford).
struct Mean {
  int64_t n = 0;
  double mean = 0, m2 = 0;
  void add(double x) {
    ++n;
    const double d = x - mean;
    mean += d / double(n);
    m2 += d * (x - mean);
  }
  double se() const { return n > 1 ? std::sqrt(m2 / double(n - 1) / double(n)) : std::nan(""); }
};

struct Transform {
  std::string name, kind;
  double tau = 0;
  attention::ScoreMod mod;
};

// The transform's score mod as every kernel gets it: resolved through the method registry
// (attention/transforms.h) with no positional encoding and s = q·k (scale 1: the raw scores are
// the N(0, 1) draws themselves), so the theory cannot drift from what a run computes.
attention::ScoreMod registry_mod(const std::string& transform, double tau) {
  attention::MethodOptions options;
  options.method = "nope";
  options.transform = transform;
  options.parameters[attention::Parameter::kTau] = tau;
  options.score_scale = 1.0;
  options.train_context = 2;  // read by no transform's policy, only by LogN's initial s_h
  const auto method = attention::resolve_method(options);
  attention::ScoreMod mod;
  mod.scale = float(method.score_scale);
  attention::transform_spec(method.transform).fill(method, mod);
  return mod;
}

std::vector<Transform> transforms(const EntropyTheoryOptions& o, std::vector<float>& head_scale) {
  std::vector<Transform> out;
  out.push_back({"standard", "standard", 0, registry_mod("none", 10.0)});
  head_scale.assign(1, float(o.logn_scale));  // LogN's s_h, fixed here (learned in a run)
  Transform logn{"logn", "logn", 0, registry_mod("logn", 10.0)};
  logn.mod.head_scale = head_scale.data();
  out.push_back(logn);
  for (const double tau : o.taus) {
    if (!(tau > 0) || !std::isfinite(tau))
      throw std::invalid_argument(fmt::format("theory entropy: tau must be > 0, got {}", tau));
    out.push_back({fmt::format("scale-invariant-tau{}", tau), "scale-invariant", tau, registry_mod("scale-invariant", tau)});
  }
  return out;
}

// IID N(0, 1) raw scores of trial `trial` at N keys: the same draws for every transform (common
// random numbers), independent of the thread that draws them.
void draw(std::vector<double>& z, int64_t n, uint64_t seed, int64_t keys, int64_t trial) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(keys), uint32_t(trial)};
  std::mt19937_64 rng(seq);
  std::normal_distribution<double> normal;
  z.resize(size_t(n));
  for (auto& x : z) x = normal(rng);
}

// Logits by distance of the query that sees N keys (i = N − 1), through the kernels' policy.
struct Tables {
  std::vector<double> mult, bias;
  Tables(const attention::ScoreMod& mod, int64_t keys) : mult(size_t(keys)), bias(size_t(keys)) {
    const int i = int(keys - 1);
    for (int t = 0; t < keys; ++t) {
      mult[t] = attention::multiplier<double>(mod, i, t, 0) * double(mod.scale);
      bias[t] = attention::distance_bias<double>(mod, t, 0);
    }
  }
  void logits(const std::vector<double>& z, std::vector<double>& l) const {
    l.resize(z.size());
    for (size_t t = 0; t < z.size(); ++t) l[t] = mult[t] * z[t] + bias[t];
  }
};

results::Array array(std::vector<int64_t> shape, std::vector<double> values, std::string units) {
  return {std::move(shape), std::move(values), std::move(units)};
}

// Adds `name` and `name_se` from per-index means.
void put(results::DatasetGroup& g, const std::string& name, std::vector<int64_t> shape,
         const std::vector<Mean>& means, const std::string& units) {
  std::vector<double> m, se;
  for (const auto& x : means) m.push_back(x.n ? x.mean : std::nan("")), se.push_back(x.se());
  g.arrays[name] = array(shape, m, units);
  g.arrays[name + "_se"] = array(std::move(shape), se, "standard error of " + name + " over trials");
}
void put(results::DatasetGroup& g, results::AttentionStatistic s, std::vector<int64_t> shape,
         const std::vector<Mean>& means) {
  put(g, results::statistic_name(s), std::move(shape), means, results::statistic_units(s));
}

// The N grid: the given contexts, or the log grid from 10 to 10^5.
std::vector<int64_t> checked_contexts(const EntropyTheoryOptions& o) {
  std::vector<int64_t> contexts = o.contexts;
  if (contexts.empty())
    for (const int64_t n : attention::log_grid(100000))
      if (n >= 10) contexts.push_back(n);
  if (o.trials < 2) throw std::invalid_argument("theory entropy: trials must be >= 2");
  for (const int64_t n : contexts)
    if (n < 1 || n > (int64_t(1) << 24))
      throw std::invalid_argument(fmt::format("theory entropy: contexts must be in [1, 2^24], got {}", n));
  if (o.range_keys < 2 || o.range_keys > (int64_t(1) << 24))
    throw std::invalid_argument("theory entropy: range_keys must be in [2, 2^24]");
  return contexts;
}

// One transform's statistics of the last query against N (Fig. 1): per context, and per
// context × band (nb bands, NaN beyond N).
struct ContextMeans {
  std::vector<Mean> entropy, recent, band_mass, band_entropy;
};

std::vector<ContextMeans> context_statistics(const EntropyTheoryOptions& o,
                                             const std::vector<int64_t>& contexts,
                                             const std::vector<Transform>& methods, size_t nb,
                                             const std::function<void(const std::string&)>& progress) {
  std::vector<ContextMeans> out(methods.size());
  for (auto& m : out) {
    m.entropy.assign(contexts.size(), {});
    m.recent.assign(contexts.size(), {});
    m.band_mass.assign(contexts.size() * nb, {});
    m.band_entropy.assign(contexts.size() * nb, {});
  }
  for (size_t c = 0; c < contexts.size(); ++c) {
    const int64_t n = contexts[c];
    const auto layout = attention::stats_layout(n, n, {});
    std::vector<Tables> tables;
    for (const auto& m : methods) tables.emplace_back(m.mod, n);
    // trial × method sums, filled in parallel, reduced in trial order.
    std::vector<attention::StatsSums> sums(size_t(o.trials) * methods.size(), attention::StatsSums(layout));
    at::parallel_for(0, o.trials, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> z, l;
      for (int64_t trial = begin; trial < end; ++trial) {
        draw(z, n, o.seed, n, trial);
        for (size_t k = 0; k < methods.size(); ++k) {
          tables[k].logits(z, l);
          attention::add_row(l.data(), n, layout, sums[size_t(trial) * methods.size() + k]);
        }
      }
    });
    for (int64_t trial = 0; trial < o.trials; ++trial)
      for (size_t k = 0; k < methods.size(); ++k) {
        const auto& s = sums[size_t(trial) * methods.size() + k];
        out[k].entropy[c].add(s.entropy);
        out[k].recent[c].add(s.recent_mass);
        for (size_t b = 0; b < layout.bands(); ++b) {
          out[k].band_mass[c * nb + b].add(s.band_mass[b]);
          out[k].band_entropy[c * nb + b].add(s.band_entropy[b]);
        }
      }
    if (progress) progress(fmt::format("N = {}: {} trials", n, o.trials));
  }
  return out;
}

// One transform's ranges [t, tΔ) at N = range_keys (Figs 2 and 6, Lemma 1): mass, entropy within
// the range, and the unnormalised total of exp(logit).
struct RangeMeans {
  std::vector<Mean> mass, entropy, total;
};

RangeMeans range_statistics(const EntropyTheoryOptions& o, const attention::ScoreMod& mod,
                            const attention::StatsLayout& layout) {
  const int64_t keys = o.range_keys;
  const size_t nr = layout.ranges();
  const Tables tables(mod, keys);
  std::vector<attention::StatsSums> sums(size_t(o.trials), attention::StatsSums(layout));
  std::vector<double> totals(size_t(o.trials) * nr, 0.0);
  at::parallel_for(0, o.trials, 1, [&](int64_t begin, int64_t end) {
    std::vector<double> z, l;
    for (int64_t trial = begin; trial < end; ++trial) {
      draw(z, keys, o.seed ^ 0x52414e4745ull, keys, trial);
      tables.logits(z, l);
      attention::add_row(l.data(), keys, layout, sums[size_t(trial)]);
      for (size_t r = 0; r < nr; ++r) {
        double total = 0;
        const int64_t a = layout.range_start[r], b = a * layout.range_ratio[r];
        for (int64_t t = a; t < b; ++t) total += std::exp(l[t]);
        totals[size_t(trial) * nr + r] = total;
      }
    }
  });
  RangeMeans out{std::vector<Mean>(nr), std::vector<Mean>(nr), std::vector<Mean>(nr)};
  for (int64_t trial = 0; trial < o.trials; ++trial)
    for (size_t r = 0; r < nr; ++r) {
      out.mass[r].add(sums[size_t(trial)].range_mass[r]);
      out.entropy[r].add(sums[size_t(trial)].range_entropy[r]);
      out.total[r].add(totals[size_t(trial) * nr + r]);
    }
  return out;
}

// What the group is: the transform, its parameters, and the axes of its datasets.
void put_description(results::DatasetGroup& g, const Transform& m, const EntropyTheoryOptions& o,
                     const std::vector<int64_t>& contexts, const attention::StatsLayout& widest,
                     const attention::StatsLayout& range_layout) {
  g.attributes["transform"] = m.kind;
  const std::string logit = m.kind == "standard" ? "logit = s, s ~ N(0, 1) IID per key"
                            : m.kind == "logn"   ? fmt::format("logit = {}*ln(N)*s", o.logn_scale)
                                                 : fmt::format("logit = a_t*s + m_t, tau = {}", m.tau);
  // The statistics' units are the runs' (results/attention_group.h); where they are taken is here.
  g.attributes["description"] = logit + "; entropy, recent_mass, band_*: per context N; range_*: at N = range_keys";
  if (m.kind == "scale-invariant") g.attributes["tau"] = double(m.tau);
  if (m.kind == "logn") g.attributes["logn_scale"] = double(o.logn_scale);
  g.attributes["range_keys"] = int64_t(o.range_keys);
  g.integers["context"] = contexts;
  g.integer_units["context"] = "keys N the query attends to";
  // Bands over the widest context (decades up to max N); ranges at N = range_keys.
  results::put_attention_axes(g, {widest.band_edges, range_layout.range_start, range_layout.range_ratio,
                                  range_layout.recent});
}

// Lemma 1: E[e^(a_t s + m_t)] = e^(a_t^2/2 + m_t) = α·τ/(t + τ), α = e^½.
// The Monte Carlo total is a sum of log-normals, Var e^(a s + m) = e^(2m)(e^(2a²) − e^(a²)):
// its standard error grows like e·√(t(Δ−1)/trials), and the sample's own estimate of it
// understates it at large t (rare large draws dominate). lemma1_se is the exact one.
void put_lemma1(results::DatasetGroup& g, double tau, const attention::StatsLayout& layout, int64_t trials) {
  const size_t nr = layout.ranges();
  std::vector<double> sum, limit, se;
  for (size_t r = 0; r < nr; ++r) {
    const int64_t a = layout.range_start[r], b = a * layout.range_ratio[r];
    double s = 0, var = 0;
    for (int64_t t = a; t < b; ++t) {
      s += 1.0 / (double(t) + tau);
      const double a = attention::scale_invariant_multiplier(tau, t), m = attention::scale_invariant_bias(tau, t);
      const double a2 = a * a, m2 = 2 * m;
      var += std::exp(m2 + 2 * a2) - std::exp(m2 + a2);
    }
    sum.push_back(std::exp(0.5) * tau * s);
    limit.push_back(std::exp(0.5) * tau * std::log(double(layout.range_ratio[r])));
    se.push_back(std::sqrt(var / double(trials)));
  }
  g.arrays["lemma1_sum"] = array({int64_t(nr)}, sum, "alpha*tau*sum_{k=t}^{t*Delta-1} 1/(k+tau)");
  g.arrays["lemma1_limit"] = array({int64_t(nr)}, limit, "alpha*tau*ln(Delta), the large-t limit");
  g.arrays["lemma1_se"] = array({int64_t(nr)}, se,
                                "exact standard error of the Monte Carlo range_total (log-normal sum)");
}

// Fits of the range entropy per Δ, on every range and on t ≥ 10: with t = 1 (for Δ = 2 a
// one-key range, entropy 0) the √(ln t) shape wins by far; from t = 10 it still fits
// scale-invariant attention better, by about the seed-to-seed spread of R² (docs/attention.md).
void put_range_fits(results::DatasetGroup& g, const std::vector<int64_t>& range_ratios,
                    const attention::StatsLayout& layout, const std::vector<Mean>& range_entropy) {
  std::vector<int64_t> ratios;
  std::vector<double> fits[2][2];  // [all t, t ≥ 10][ln t, √(ln t)]: slope, intercept, R² per Δ
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (const int64_t ratio : range_ratios) {
    std::vector<double> x[2][2], y[2];
    for (size_t r = 0; r < layout.ranges(); ++r)
      if (layout.range_ratio[r] == ratio) {
        const double t = double(layout.range_start[r]);
        for (int from10 = 0; from10 < 2; ++from10) {
          if (from10 && t < 10) continue;
          x[from10][0].push_back(std::log(t));
          x[from10][1].push_back(std::sqrt(std::log(t)));
          y[from10].push_back(range_entropy[r].mean);
        }
      }
    if (y[0].size() < 2) continue;
    ratios.push_back(ratio);
    for (int from10 = 0; from10 < 2; ++from10)
      for (int shape = 0; shape < 2; ++shape) {
        if (y[from10].size() < 2) {
          fits[from10][shape].insert(fits[from10][shape].end(), {kNaN, kNaN, kNaN});
          continue;
        }
        const LineFit f = fit_line(x[from10][shape], y[from10]);
        fits[from10][shape].insert(fits[from10][shape].end(), {f.slope, f.intercept, f.r2});
      }
  }
  g.integers["fit_ratio"] = ratios;
  g.integer_units["fit_ratio"] = "Delta of each fit row";
  const int64_t nf = int64_t(ratios.size());
  g.arrays["fit_ln_t"] = array({nf, 3}, fits[0][0],
                               "slope, intercept, R^2 of range_entropy = slope*ln(t) + intercept");
  g.arrays["fit_sqrt_ln_t"] = array({nf, 3}, fits[0][1],
                                    "slope, intercept, R^2 of range_entropy = slope*sqrt(ln t) + intercept");
  g.arrays["fit_ln_t_from10"] = array({nf, 3}, fits[1][0], "as fit_ln_t, on the ranges with t >= 10");
  g.arrays["fit_sqrt_ln_t_from10"] = array({nf, 3}, fits[1][1],
                                           "as fit_sqrt_ln_t, on the ranges with t >= 10");
}

}  // namespace

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) throw std::invalid_argument("fit_line: need two points or more");
  const double n = double(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i] / n, my += y[i] / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  LineFit f;
  f.slope = sxx > 0 ? sxy / sxx : 0.0;
  f.intercept = my - f.slope * mx;
  f.r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : 1.0;
  return f;
}

std::vector<TheoryTransform> entropy_theory(const EntropyTheoryOptions& o,
                                            const std::function<void(const std::string&)>& progress) {
  const std::vector<int64_t> contexts = checked_contexts(o);
  std::vector<float> head_scale;
  const auto methods = transforms(o, head_scale);
  const int64_t max_n = *std::max_element(contexts.begin(), contexts.end());
  const auto widest = attention::stats_layout(max_n, max_n, {});  // decade bands up to max N
  const size_t nb = widest.bands();
  const auto range_layout = attention::stats_layout(o.range_keys, o.range_keys, o.range_ratios);
  const int64_t nc = int64_t(contexts.size()), nr = int64_t(range_layout.ranges());

  const std::vector<ContextMeans> by_context = context_statistics(o, contexts, methods, nb, progress);
  std::vector<TheoryTransform> out;
  for (size_t k = 0; k < methods.size(); ++k) {
    const Transform& m = methods[k];
    const RangeMeans ranges = range_statistics(o, m.mod, range_layout);
    out.push_back({m.name, {}});
    auto& g = out.back().datasets;
    put_description(g, m, o, contexts, widest, range_layout);
    const ContextMeans& c = by_context[k];
    using S = results::AttentionStatistic;
    put(g, S::kEntropy, {nc}, c.entropy);
    put(g, S::kRecentMass, {nc}, c.recent);
    put(g, S::kBandMass, {nc, int64_t(nb)}, c.band_mass);
    put(g, S::kBandEntropy, {nc, int64_t(nb)}, c.band_entropy);
    put(g, S::kRangeMass, {nr}, ranges.mass);  // at N = range_keys
    put(g, S::kRangeEntropy, {nr}, ranges.entropy);
    put(g, "range_total", {nr}, ranges.total, "sum of exp(logit) over the range (unnormalised)");
    // A sum of log-normals: rare large draws dominate its variance, so the sample's spread
    // understates the error at large t by up to ~20x (Delta = 10, t = 10^4: 2.6 vs 51 exact).
    g.arrays["range_total_se"].units =
        "standard error over trials as sampled: understates a log-normal sum's true error at large t"
        " (scale-invariant transforms: lemma1_se is the exact one)";
    if (m.kind == "scale-invariant") put_lemma1(g, m.tau, range_layout, o.trials);
    put_range_fits(g, o.range_ratios, range_layout, ranges.entropy);
    if (progress) progress(fmt::format("{}: ranges at N = {}", m.name, o.range_keys));
  }
  return out;
}

void write_entropy_theory(const std::string& path, const EntropyTheoryOptions& o,
                          const std::vector<TheoryTransform>& transforms) {
  results::h5::publish_file(path, [&](hid_t file) {
    results::h5::write_string_attr(file, "kind", "theory-entropy");
    results::h5::write_string_attr(
        file, "description",
        "Monte Carlo of attention over N keys with IID N(0,1) raw scores per transform "
        "(arXiv 2505.17083, Figs 1, 2, 6, Lemma 1); dataset names as in run.h5 /eval/<T>/attention");
    results::h5::write_int_attr(file, "trials", o.trials);
    results::h5::write_int_attr(file, "seed", int64_t(o.seed));
    for (const auto& t : transforms) results::write_group(file, t.name, t.datasets);
  });
}

}  // namespace analysis
