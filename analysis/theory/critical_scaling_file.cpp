#include "analysis/theory/critical_scaling_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cmath>
#include <set>
#include <stdexcept>

#include "common/build_info.h"
#include "results/hdf5_io.h"

namespace analysis {

namespace {

namespace h5 = results::h5;
using Dims = std::vector<hsize_t>;

constexpr int64_t kFormatVersion = 1;

struct PerPointSpec {
  const char* name;
  std::vector<double> CriticalScalingResult::*field;
  const char* units;
  const char* description;
};

// The (N, D, R, G) datasets of /simulation.
const PerPointSpec kPerPoint[] = {
    {"c_out", &CriticalScalingResult::c_out, "cosine",
     "mean pairwise cosine of the outputs y'_i (over the sampled query rows)"},
    {"c_out_se", &CriticalScalingResult::c_out_se, "cosine", "standard error of c_out from the row sampling"},
    {"lambda", &CriticalScalingResult::lambda, "1",
     "arccos(c_out)/arccos(c_in), both over the sampled query rows: 0 = collapse to one "
     "direction, 1 = angles kept"},
    {"self_weight", &CriticalScalingResult::self_weight, "attention weight",
     "mean A_ii over the sampled query rows"},
    {"self_weight_se", &CriticalScalingResult::self_weight_se, "attention weight",
     "standard error of self_weight from the row sampling"},
    {"entropy", &CriticalScalingResult::entropy, "1",
     "mean row entropy -sum_j A_ij ln A_ij / ln n (1 = uniform, 0 = one key)"},
    {"entropy_se", &CriticalScalingResult::entropy_se, "1", "standard error of entropy from the row sampling"},
    {"eta", &CriticalScalingResult::eta, "1",
     "||dY'/dY||_F^2/(n d), Hutchinson estimate with vector-Jacobian products"},
    {"eta_se", &CriticalScalingResult::eta_se, "1",
     "standard error of eta over Hutchinson probes (rows and signs)"},
};

std::string group_name(const std::string& name, std::set<std::string>& used) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  if (out.empty()) out = "run";
  std::string unique = out;
  for (int k = 2; !used.insert(unique).second; ++k) unique = fmt::format("{}_{}", out, k);
  return unique;
}

// Reads `name` and checks its shape.
std::vector<double> read_checked(hid_t group, const std::string& name, const Dims& dims,
                                 const std::string& path) {
  auto a = h5::read_array(group, name);
  if (a.dims != dims)
    throw std::runtime_error(fmt::format("{}: dataset {} has shape ({}), expected ({})", path, name,
                                         fmt::join(a.dims, ", "), fmt::join(dims, ", ")));
  return std::move(a.data);
}

// /trained: one group per trained LogN run, its per-head table as (layers, heads) arrays.
void write_trained(hid_t file, const std::vector<TrainedLognReport>& trained) {
  auto trained_group = h5::create_group(file, "trained");
  std::set<std::string> used;
  for (const auto& t : trained) {
    auto g = h5::create_group(trained_group, group_name(t.name, used));
    h5::write_string_attr(g, "run_dir", t.run_dir);
    h5::write_string_attr(g, "name", t.name);
    h5::write_string_attr(g, "method", t.method);
    h5::write_int_attr(g, "train_context", t.train_context);
    h5::write_int_attr(g, "context", t.context);
    h5::write_int_attr(g, "windows", t.windows);
    h5::write_int_attr(g, "head_dim", t.head_dim);
    h5::write_double_attr(g, "score_scale", t.score_scale);
    const Dims dims{hsize_t(t.layers), hsize_t(t.heads)};
    const auto column = [&](double TrainedHead::*field) {
      std::vector<double> v;
      for (const auto& h : t.table) v.push_back(h.*field);
      return v;
    };
    h5::write_array(g, "scale", dims, column(&TrainedHead::scale), "1",
                    "learned LogN scale s_h (blocks.<layer>.attn.core.logn_scale)");
    h5::write_array(g, "gamma_eff", dims, column(&TrainedHead::gamma_eff), "1",
                    "effective gamma = s_h * score_scale * head_dim");
    h5::write_array(g, "key_cosine", dims, column(&TrainedHead::key_cosine), "cosine",
                    "mean pairwise cosine of the QK-normed keys over window positions");
    h5::write_array(g, "key_cosine_rotated", dims, column(&TrainedHead::key_cosine_rotated),
                    "cosine", "the same for the keys as the kernel sees them (after rotary)");
    h5::write_array(g, "gamma_c", dims, column(&TrainedHead::gamma_c), "1", "1/(1 - key_cosine)");
    h5::write_array(g, "gamma_c_rotated", dims, column(&TrainedHead::gamma_c_rotated), "1",
                    "1/(1 - key_cosine_rotated)");
  }
}

std::vector<TrainedLognReport> read_trained(hid_t file, const std::string& path) {
  std::vector<TrainedLognReport> out;
  auto trained = h5::open_group(file, "trained");
  for (const auto& name : h5::member_names(trained)) {
    auto g = h5::open_group(trained, name);
    TrainedLognReport t;
    t.run_dir = h5::read_string_attr(g, "run_dir");
    t.name = h5::read_string_attr(g, "name");
    t.method = h5::read_string_attr(g, "method");
    t.train_context = h5::read_int_attr(g, "train_context");
    t.context = h5::read_int_attr(g, "context");
    t.windows = h5::read_int_attr(g, "windows");
    t.head_dim = h5::read_int_attr(g, "head_dim");
    t.score_scale = h5::read_double_attr(g, "score_scale");
    const auto scale = h5::read_array(g, "scale");
    if (scale.dims.size() != 2) throw std::runtime_error(path + ": /trained/" + name + "/scale is not (layers, heads)");
    t.layers = int64_t(scale.dims[0]);
    t.heads = int64_t(scale.dims[1]);
    const Dims dims = scale.dims;
    const auto gamma_eff = read_checked(g, "gamma_eff", dims, path);
    const auto key_cosine = read_checked(g, "key_cosine", dims, path);
    const auto key_cosine_rotated = read_checked(g, "key_cosine_rotated", dims, path);
    const auto gamma_c = read_checked(g, "gamma_c", dims, path);
    const auto gamma_c_rotated = read_checked(g, "gamma_c_rotated", dims, path);
    for (size_t k = 0; k < scale.data.size(); ++k) {
      TrainedHead h;
      h.layer = int64_t(k) / t.heads;
      h.head = int64_t(k) % t.heads;
      h.scale = scale.data[k];
      h.gamma_eff = gamma_eff[k];
      h.key_cosine = key_cosine[k];
      h.key_cosine_rotated = key_cosine_rotated[k];
      h.gamma_c = gamma_c[k];
      h.gamma_c_rotated = gamma_c_rotated[k];
      t.table.push_back(h);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

void write_critical_scaling_file(const std::string& path, const CriticalScalingResult& r,
                                 const std::vector<TrainedLognReport>& trained) {
  const auto& c = r.config;
  const Dims cells{r.N, r.D, r.R}, points{r.N, r.D, r.R, r.G};
  h5::publish_file(path, [&](hid_t file) {
    h5::write_string_attr(file, "kind", kCriticalScalingKind);
    h5::write_int_attr(file, "format_version", kFormatVersion);
    h5::write_string_attr(file, "paper", "Chen, Lin, Polyanskiy, Rigollet: Critical attention "
                                         "scaling in long-context transformers, arXiv 2510.05554");
    h5::write_string_attr(file, "description",
                          "one attention step A = softmax(beta Y Y^T), beta = gamma ln n, "
                          "y'_i = N(sum_j A_ij y_j), on tokens x_i = sqrt(rho) z_0 + sqrt(1-rho) z_i, "
                          "y = x/|x|; statistics over the first `rows` query rows");
    h5::write_string_attr(file, "source", c.source);
    h5::write_string_attr(file, "config_yaml", c.text);
    h5::write_int_attr(file, "seed", int64_t(c.seed));
    h5::write_int_attr(file, "trials", c.trials);
    h5::write_int_attr(file, "rows", c.rows);
    h5::write_int_attr(file, "hutchinson_rows", c.hutchinson_rows);
    h5::write_int_attr(file, "hutchinson_probes", c.hutchinson_probes);
    h5::write_int_attr(file, "causal_rows", c.causal_rows);
    h5::write_string_attr(file, "precision", c.float64 ? "float64" : "float32");
    h5::write_string_attr(file, "hutchinson_precision", c.hutchinson_float64 ? "float64" : "float32");
    h5::write_int_attr(file, "threads", r.threads);
    h5::write_double_attr(file, "seconds", r.seconds);
    h5::write_string_attr(file, "git_revision", harness::git_revision());
    h5::write_string_attr(file, "libtorch_version", harness::libtorch_version());

    auto grid = h5::create_group(file, "grid");
    h5::write_array(grid, "n", {r.N}, c.n, "tokens", "number of tokens n (the context length)");
    h5::write_array(grid, "d", {r.D}, c.d, "dimensions", "token dimension d");
    h5::write_array(grid, "rho", {r.R}, c.rho, "cosine", "rho of the token model");
    h5::write_array(grid, "gamma", {r.R, r.G}, r.gamma, "1",
                    "gamma of beta = gamma ln n, per rho (row) and grid point (column)");

    auto sim = h5::create_group(file, "simulation");
    h5::write_array(sim, "c_in", cells, r.c_in, "cosine",
                    "measured mean pairwise cosine of the input tokens y (all pairs, mean over trials)");
    for (const auto& spec : kPerPoint)
      h5::write_array(sim, spec.name, points, r.*spec.field, spec.units, spec.description);

    auto oracle = h5::create_group(file, "oracle");
    const Dims oracle_dims{r.N, r.R, r.G};
    h5::write_array(oracle, "c_out", oracle_dims, r.oracle_c_out, "cosine",
                    "closed-form c_out for exactly equiangular tokens (all pairwise cosines rho)");
    h5::write_array(oracle, "self_weight", oracle_dims, r.oracle_self_weight, "attention weight",
                    "closed-form A_ii = 1/(1 + (n-1) n^(-gamma (1-rho)))");
    h5::write_array(oracle, "lambda", oracle_dims, r.oracle_lambda, "1",
                    "arccos(oracle c_out)/arccos(rho)");

    auto critical = h5::create_group(file, "critical");
    h5::write_array(critical, "gamma_c_hat", cells, r.gamma_c_hat, "1",
                    "gamma where the mean A_ii crosses 1/2 (grid bracket refined by regula falsi; "
                    "NaN when never reached)");
    h5::write_array(critical, "in_grid", cells, r.gamma_c_in_grid, "1",
                    "1 when the crossing lies inside the gamma grid, 0 when found beyond it");
    std::vector<double> theory, from_c_in;
    for (double rho : c.rho) theory.push_back(1.0 / (1.0 - rho));
    for (double ci : r.c_in) from_c_in.push_back(1.0 / (1.0 - ci));
    h5::write_array(critical, "gamma_c_rho", {r.R}, theory, "1", "theory: 1/(1 - rho)");
    h5::write_array(critical, "gamma_c_c_in", cells, from_c_in, "1",
                    "theory with the measured input cosine: 1/(1 - c_in)");

    auto causal = h5::create_group(file, "causal");
    h5::write_string_attr(causal, "scalings", "per-row: beta_i = gamma ln(i+1); global: beta = gamma ln T");
    h5::write_string_attr(causal, "phases", "collapse (A_ii < collapse_below), critical, identity (A_ii > identity_above)");
    h5::write_double_attr(causal, "collapse_below", c.collapse_below);
    h5::write_double_attr(causal, "identity_above", c.identity_above);
    h5::write_array(causal, "fraction", {r.N, r.D, r.R, r.G, 2, 3}, r.causal_fraction, "fraction of rows",
                    "causal mask: fraction of the sampled rows in each phase [scaling: per-row, "
                    "global][phase: collapse, critical, identity]");
    h5::write_array(causal, "self_weight", {r.N, r.D, r.R, r.G, 2}, r.causal_self_weight,
                    "attention weight", "causal mask: mean A_ii [scaling: per-row, global]");

    write_trained(file, trained);
  });
}

CriticalScalingFile read_critical_scaling_file(const std::string& path) {
  const std::string kind = h5::file_kind(path);
  auto file = h5::open_file(path);
  if (kind != kCriticalScalingKind)
    throw std::runtime_error(fmt::format("{}: not a critical-scaling file (kind '{}')", path, kind));
  CriticalScalingFile out;
  auto& r = out.result;
  auto& c = r.config;
  c.source = h5::read_string_attr(file, "source");
  c.text = h5::read_string_attr(file, "config_yaml");
  c.seed = uint64_t(h5::read_int_attr(file, "seed"));
  c.trials = h5::read_int_attr(file, "trials");
  c.rows = h5::read_int_attr(file, "rows");
  c.hutchinson_rows = h5::read_int_attr(file, "hutchinson_rows");
  c.hutchinson_probes = h5::read_int_attr(file, "hutchinson_probes");
  c.causal_rows = h5::read_int_attr(file, "causal_rows");
  c.float64 = h5::read_string_attr(file, "precision") == "float64";
  c.hutchinson_float64 = h5::read_string_attr(file, "hutchinson_precision") == "float64";
  r.threads = int(h5::read_int_attr(file, "threads"));
  r.seconds = h5::read_double_attr(file, "seconds");

  auto grid = h5::open_group(file, "grid");
  const auto to_int = [](const std::vector<double>& v) {
    std::vector<int64_t> out;
    for (double x : v) out.push_back(int64_t(std::llround(x)));
    return out;
  };
  c.n = to_int(h5::read_array(grid, "n").data);
  c.d = to_int(h5::read_array(grid, "d").data);
  c.rho = h5::read_array(grid, "rho").data;
  r.N = c.n.size();
  r.D = c.d.size();
  r.R = c.rho.size();
  const auto gamma = h5::read_array(grid, "gamma");
  if (gamma.dims.size() != 2 || gamma.dims[0] != r.R)
    throw std::runtime_error(path + ": /grid/gamma is not (R, G)");
  r.G = gamma.dims[1];
  r.gamma = gamma.data;
  c.gamma_values.clear();
  c.gamma_count = int64_t(r.G);
  const Dims cells{r.N, r.D, r.R}, points{r.N, r.D, r.R, r.G};

  auto sim = h5::open_group(file, "simulation");
  r.c_in = read_checked(sim, "c_in", cells, path);
  for (const auto& spec : kPerPoint) r.*spec.field = read_checked(sim, spec.name, points, path);
  auto oracle = h5::open_group(file, "oracle");
  const Dims oracle_dims{r.N, r.R, r.G};
  r.oracle_c_out = read_checked(oracle, "c_out", oracle_dims, path);
  r.oracle_self_weight = read_checked(oracle, "self_weight", oracle_dims, path);
  r.oracle_lambda = read_checked(oracle, "lambda", oracle_dims, path);
  auto critical = h5::open_group(file, "critical");
  r.gamma_c_hat = read_checked(critical, "gamma_c_hat", cells, path);
  r.gamma_c_in_grid = to_int(read_checked(critical, "in_grid", cells, path));
  auto causal = h5::open_group(file, "causal");
  c.collapse_below = h5::read_double_attr(causal, "collapse_below");
  c.identity_above = h5::read_double_attr(causal, "identity_above");
  r.causal_fraction = read_checked(causal, "fraction", {r.N, r.D, r.R, r.G, 2, 3}, path);
  r.causal_self_weight = read_checked(causal, "self_weight", {r.N, r.D, r.R, r.G, 2}, path);

  out.trained = read_trained(file, path);
  return out;
}

}  // namespace analysis
