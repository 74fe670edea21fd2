// The critical-scaling HDF5 file and its figures: the file reads back exactly, every dataset
// carries units and a description, publishing is atomic, and the figures and the γ̂_c table show
// the file's numbers.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "analysis/theory/critical_figures.h"
#include "analysis/theory/critical_scaling.h"
#include "analysis/theory/critical_scaling_file.h"
#include "analysis/export/plot.h"
#include "results/hdf5_io.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

analysis::CriticalScalingConfig tiny_grid() {
  auto c = analysis::quick_critical_scaling_config();
  c.source = "tiny";
  c.n = {64};
  c.d = {4, 16};
  c.rho = {0.3, 0.6};
  c.gamma_count = 6;
  c.rows = 16;
  c.hutchinson_rows = 8;
  c.hutchinson_probes = 2;
  c.causal_rows = 16;
  c.threads = 1;
  return c;
}

void expect_same(const std::vector<double>& a, const std::vector<double>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) << what << "[" << i << "]";
}

}  // namespace

TEST(CriticalScalingFile, ReadsBackExactlyWithUnitsOnEveryDataset) {
  test_support::TempDir dir;
  const auto result = analysis::run_critical_scaling(tiny_grid());
  const std::string path = (dir.path / "out" / "critical.h5").string();
  analysis::TrainedLognReport trained;
  trained.name = "a run/with odd name";
  trained.run_dir = "/runs/x";
  trained.method = "logn";
  trained.layers = 1;
  trained.heads = 2;
  trained.head_dim = 16;
  trained.score_scale = 0.25;
  trained.table = {{0, 0, 0.3, 1.2, 0.1, 0.2, 1.111, 1.25}, {0, 1, 0.4, 1.6, 0.5, 0.6, 2.0, 2.5}};
  analysis::write_critical_scaling_file(path, result, {trained});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(results::h5::file_kind(path), "critical-scaling");

  const auto back = analysis::read_critical_scaling_file(path);
  const auto& r = back.result;
  EXPECT_EQ(r.config.n, result.config.n);
  EXPECT_EQ(r.config.d, result.config.d);
  EXPECT_EQ(r.config.rho, result.config.rho);
  EXPECT_EQ(r.G, result.G);
  expect_same(r.gamma, result.gamma, "gamma");
  expect_same(r.c_in, result.c_in, "c_in");
  expect_same(r.lambda, result.lambda, "lambda");
  expect_same(r.eta, result.eta, "eta");
  expect_same(r.eta_se, result.eta_se, "eta_se");
  expect_same(r.self_weight, result.self_weight, "self_weight");
  expect_same(r.oracle_c_out, result.oracle_c_out, "oracle_c_out");
  expect_same(r.gamma_c_hat, result.gamma_c_hat, "gamma_c_hat");
  expect_same(r.causal_fraction, result.causal_fraction, "causal_fraction");
  EXPECT_EQ(r.gamma_c_in_grid, result.gamma_c_in_grid);
  EXPECT_EQ(r.config.collapse_below, 0.25);
  ASSERT_EQ(back.trained.size(), 1u);
  EXPECT_EQ(back.trained[0].name, trained.name);
  ASSERT_EQ(back.trained[0].table.size(), 2u);
  EXPECT_EQ(back.trained[0].table[1].head, 1);
  EXPECT_EQ(back.trained[0].table[1].gamma_eff, 1.6);

  // Plain datasets with units and a description, as h5py sees them.
  namespace h5 = results::h5;
  auto file = h5::open_file(path);
  EXPECT_EQ(h5::read_string_attr(file, "kind"), "critical-scaling");
  size_t datasets = 0;
  for (const char* group_name : {"grid", "simulation", "oracle", "critical", "causal"}) {
    auto group = h5::open_group(file, group_name);
    for (const auto& name : h5::member_names(group)) {
      h5::Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open " + name);
      EXPECT_FALSE(h5::read_string_attr(ds, "units").empty()) << group_name << "/" << name;
      EXPECT_FALSE(h5::read_string_attr(ds, "description").empty()) << group_name << "/" << name;
      ++datasets;
    }
  }
  EXPECT_EQ(datasets, 4u + 10u + 3u + 4u + 2u);
  EXPECT_EQ(h5::read_array(h5::open_group(file, "simulation"), "lambda").dims,
            std::vector<hsize_t>({1, 2, 2, 6}));
  EXPECT_TRUE(h5::exists(h5::open_group(file, "trained"), "a_run_with_odd_name"));
}

TEST(CriticalScalingFile, AFailedWriteLeavesThePreviousFile) {
  test_support::TempDir dir;
  const std::string path = (dir.path / "x.h5").string();
  results::h5::publish_file(path, [](hid_t f) { results::h5::write_string_attr(f, "kind", "old"); });
  EXPECT_THROW(results::h5::publish_file(path,
                                                 [](hid_t f) {
                                                   results::h5::write_string_attr(f, "kind", "new");
                                                   throw std::runtime_error("crash mid-write");
                                                 }),
               std::runtime_error);
  EXPECT_EQ(results::h5::file_kind(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_THROW(analysis::read_critical_scaling_file(path), std::runtime_error);
}

TEST(CriticalScalingFile, FiguresAndTableShowTheFilesNumbers) {
  test_support::TempDir dir;
  const auto result = analysis::run_critical_scaling(tiny_grid());
  const std::string path = (dir.path / "critical.h5").string();
  analysis::TrainedLognReport trained;
  trained.name = "logn";
  trained.layers = 1;
  trained.heads = 2;
  trained.table = {{0, 0, 0.5, 2.8, 0.6, 0.05, 2.5, 1.05}, {0, 1, 0.4, 2.3, 0.7, 0.1, 3.33, 1.11}};
  analysis::write_critical_scaling_file(path, result, {trained});
  const auto figures = analysis::export_critical_scaling_figures(path, (dir.path / "fig").string());
  for (const auto& f : figures.files) EXPECT_TRUE(fs::exists(f)) << f;
  // The γ̂_c CSV holds the file's values; the table prints them.
  const std::string csv = test_support::read_text(dir.path / "fig" / "critical_gamma_c_n64.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "rho,gamma_c_theory,c_in_d4,gamma_c_c_in_d4,gamma_c_hat_d4,c_in_d16,gamma_c_c_in_d16,"
            "gamma_c_hat_d16,gamma_c_hat_in_grid_d4,gamma_c_hat_beyond_grid_d4,gamma_c_hat_in_grid_d16,"
            "gamma_c_hat_beyond_grid_d16");
  // γ̂_c is in exactly one of the two columns the figures draw (measured, or beyond the grid and
  // drawn at the frame's edge), as the file's gamma_c_in_grid says.
  std::stringstream rows(csv.substr(csv.find('\n') + 1));
  size_t ir = 0;
  for (std::string line; std::getline(rows, line); ++ir) {
    std::vector<std::string> f;
    std::stringstream fields(line + ",");
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 12u) << line;
    for (size_t id = 0; id < 2; ++id) {
      const size_t cell = result.cell(0, id, ir);
      const bool in_grid = result.gamma_c_in_grid[cell] != 0;
      EXPECT_EQ(f[8 + 2 * id].empty(), !in_grid) << line;
      EXPECT_EQ(f[9 + 2 * id].empty(), in_grid || !std::isfinite(result.gamma_c_hat[cell])) << line;
    }
  }
  const double hat = result.gamma_c_hat[result.cell(0, 1, 1)];  // n 64, d 16, ρ 0.6
  EXPECT_NE(csv.find(fmt::format("{:.9g}", hat)), std::string::npos) << csv;
  EXPECT_NE(figures.gamma_c_table.find(fmt::format("{:.3f} |", hat)), std::string::npos)
      << figures.gamma_c_table;
  EXPECT_NE(figures.gamma_c_table.find("| 0.60 | 2.500 |"), std::string::npos);
  EXPECT_EQ(test_support::read_text(dir.path / "fig" / "critical_gamma_c.md").find("# Critical γ"), 0u);
  if (analysis::gnuplot_available()) {
    EXPECT_TRUE(figures.notices.empty()) << figures.notices.front();
    for (const char* image : {"critical_lambda_n64_d16.png", "critical_eta_n64_d4.png",
                              "critical_gamma_c_n64.png", "critical_causal_n64_d16.png",
                              "critical_trained.png"})
      EXPECT_GT(fs::file_size(dir.path / "fig" / image), 5000u) << image;
  }
}
