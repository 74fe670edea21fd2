#include "results/run_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "results/hdf5_io.h"

namespace results {

namespace {

using h5::Handle;

constexpr int kFormatVersion = 1;

void write_column(hid_t g, const std::string& name, const std::vector<int64_t>& v,
                  const std::string& units) {
  h5::write_dataset(g, name, H5T_NATIVE_INT64, v.data(), {v.size()}, units);
}
void write_column(hid_t g, const std::string& name, const std::vector<double>& v,
                  const std::string& units) {
  h5::write_dataset(g, name, H5T_NATIVE_DOUBLE, v.data(), {v.size()}, units);
}
void write_matrix(hid_t g, const std::string& name, const std::vector<std::vector<double>>& m,
                  const std::string& units) {
  const size_t cols = m.empty() ? 0 : m.front().size();
  std::vector<double> flat;
  flat.reserve(m.size() * cols);
  for (const auto& row : m) {
    if (row.size() != cols) throw std::runtime_error("ragged rows in dataset " + name);
    flat.insert(flat.end(), row.begin(), row.end());
  }
  // An empty matrix is stored as (0, 1) so that it stays 2-D for readers.
  h5::write_dataset(g, name, H5T_NATIVE_DOUBLE, flat.data(), {m.size(), std::max<size_t>(cols, 1)},
                    units);
}

// A (rows, cols) dataset (written with cols ≥ 1; a 1-D one reads as one column).
std::vector<std::vector<double>> read_matrix(hid_t g, const std::string& name) {
  const auto dims = h5::dataset_dims(g, name);
  if (dims.empty() || dims.size() > 2 || (dims.size() == 2 && dims[1] == 0))
    throw std::runtime_error(fmt::format("dataset {}: shape ({}), not (rows, columns ≥ 1)", name,
                                         fmt::join(dims, ", ")));
  const auto flat = h5::read_doubles(g, name);
  const size_t rows = dims[0], cols = dims.size() > 1 ? dims[1] : 1;
  std::vector<std::vector<double>> out(rows);
  for (size_t r = 0; r < rows; ++r) out[r].assign(flat.begin() + r * cols, flat.begin() + (r + 1) * cols);
  return out;
}

}  // namespace

const char* to_string(RunState s) {
  switch (s) {
    case RunState::kRunning: return "running";
    case RunState::kDone: return "done";
    case RunState::kFailed: return "failed";
    case RunState::kInterrupted: return "interrupted";
  }
  return "unknown";
}

RunState run_state_from_string(const std::string& s) {
  for (RunState r : {RunState::kRunning, RunState::kDone, RunState::kFailed, RunState::kInterrupted})
    if (s == to_string(r)) return r;
  throw std::invalid_argument("unknown run state '" + s + "'");
}

void RunRecord::truncate_after(int64_t step) {
  const auto keep = [&](const std::vector<int64_t>& steps) {
    return size_t(std::upper_bound(steps.begin(), steps.end(), step) - steps.begin());
  };
  const size_t n = keep(train.step);
  train.step.resize(n);
  train.tokens.resize(n);
  train.loss.resize(n);
  train.lr.resize(n);
  train.grad_norm.resize(n);
  train.seconds.resize(n);
  for (auto& [context, rows] : eval) {
    const size_t m = keep(rows.step);
    if (m < rows.step.size()) {  // they were the dropped last validation's
      rows.window_loss.clear();
      rows.window_fingerprint.clear();
      rows.window_document.clear();
    }
    rows.step.resize(m);
    rows.loss.resize(m);
    rows.loss_se.resize(std::min(m, rows.loss_se.size()));
    rows.windows.resize(std::min(m, rows.windows.size()));
    rows.position_loss.resize(std::min(m, rows.position_loss.size()));
    rows.score_std.resize(std::min(m, rows.score_std.size()));
    rows.attention.truncate_rows(m);
  }
}

void publish(const RunRecord& r, const std::string& path) {
  h5::publish_file(path, [&](hid_t file) {
    h5::write_int_attr(file, "format_version", kFormatVersion);

    Handle config = h5::create_group(file, "config");
    for (const auto& [key, value] : r.config) h5::write_string_attr(config, key, value);
    h5::write_int_attr(config, "threads", r.threads);
    for (const auto& [key, value] : r.config_ints) h5::write_int_attr(config, key, value);

    Handle status = h5::create_group(file, "status");
    h5::write_string_attr(status, "state", to_string(r.state));
    h5::write_string_attr(status, "reason", r.reason);
    h5::write_int_attr(status, "step", r.status_step);

    Handle train = h5::create_group(file, "train");
    write_column(train, "step", r.train.step, "optimiser steps completed");
    write_column(train, "tokens", r.train.tokens, "training tokens seen");
    write_column(train, "loss", r.train.loss, "nats/token");
    write_column(train, "lr", r.train.lr, "learning-rate factor of the schedule (1 = base)");
    write_column(train, "grad_norm", r.train.grad_norm, "global L2 norm before clipping");
    write_column(train, "seconds", r.train.seconds, "s since the run started (excluding eval)");

    Handle eval = h5::create_group(file, "eval");
    for (const auto& [context, rows] : r.eval) {
      Handle g = h5::create_group(eval, std::to_string(context));
      h5::write_int_attr(g, "context", context);
      write_column(g, "step", rows.step, "optimiser steps completed");
      write_column(g, "loss", rows.loss, "nats/token");
      write_column(g, "loss_se", rows.loss_se,
                   "nats/token, standard error of loss over the windows: sd of per-window means / sqrt(windows)");
      write_column(g, "windows", rows.windows, "validation windows of T tokens");
      if (!rows.window_loss.empty()) {
        write_column(g, "window_loss", rows.window_loss,
                     "nats/token, mean over each validation window's tokens at the last validation (step[-1]), "
                     "in window order");
        h5::write_string_attr(g, "window_fingerprint", rows.window_fingerprint);
        if (rows.window_document.size() == rows.window_loss.size())
          write_column(g, "window_document", rows.window_document,
                       "each window's validation document, numbered 0, 1, ... in window order");
      }
      write_matrix(g, "position_loss", rows.position_loss,
                   "nats/token, per equal-width bucket of window positions");
      write_matrix(g, "score_std", rows.score_std, "std of raw scores scale*q.k, per layer");
      if (!rows.attention.empty()) write_group(g, "attention", rows.attention);
    }
    if (!r.needle.empty()) {
      Handle needle = h5::create_group(file, "needle");
      for (const auto& [context, group] : r.needle) {
        write_group(needle, std::to_string(context), group);
        Handle g = h5::open_group(needle, std::to_string(context));
        h5::write_int_attr(g, "context", context);
      }
    }
    if (!r.analysis.empty()) {
      Handle analysis = h5::create_group(file, "analysis");
      for (const auto& [context, group] : r.analysis) {
        Handle g = h5::create_group(analysis, std::to_string(context));
        h5::write_int_attr(g, "context", context);
        write_group(g, "attention", group);
      }
    }
  });
}

namespace {

// One /eval/<T> group; the columns files written before them lack read as unknown.
EvalRows read_eval_rows(hid_t g) {
  EvalRows rows;
  rows.step = h5::read_integers(g, "step");
  rows.loss = h5::read_doubles(g, "loss");
  // Files written before loss_se was stored: unknown (NaN, 0 windows).
  rows.loss_se = h5::exists(g, "loss_se") ? h5::read_doubles(g, "loss_se")
                                          : std::vector<double>(rows.loss.size(), std::nan(""));
  rows.windows = h5::exists(g, "windows") ? h5::read_integers(g, "windows")
                                          : std::vector<int64_t>(rows.loss.size(), 0);
  if (h5::exists(g, "window_loss")) {
    rows.window_loss = h5::read_doubles(g, "window_loss");
    // "" (not paired) in a file written before the fingerprint was stored.
    if (h5::has_attr(g, "window_fingerprint")) rows.window_fingerprint = h5::read_string_attr(g, "window_fingerprint");
    // Empty in a file written before 2026-12-07 (or one whose count differs: then unusable).
    if (h5::exists(g, "window_document")) rows.window_document = h5::read_integers(g, "window_document");
    if (rows.window_document.size() != rows.window_loss.size()) rows.window_document.clear();
  }
  rows.position_loss = read_matrix(g, "position_loss");
  rows.score_std = read_matrix(g, "score_std");
  // One row per validation (the matrices at most one each); a loss_se or windows column of
  // another length (a record written without them) reads as unknown, as a missing one does.
  if (rows.loss.size() != rows.step.size() || rows.position_loss.size() > rows.step.size() ||
      rows.score_std.size() > rows.step.size())
    throw std::runtime_error(fmt::format(
        "columns of different lengths: step {}, loss {}, position_loss {}, score_std {}", rows.step.size(),
        rows.loss.size(), rows.position_loss.size(), rows.score_std.size()));
  if (rows.loss_se.size() != rows.step.size()) rows.loss_se.assign(rows.step.size(), std::nan(""));
  if (rows.windows.size() != rows.step.size()) rows.windows.assign(rows.step.size(), 0);
  if (h5::exists(g, "attention")) rows.attention = read_group(g, "attention");
  return rows;
}

// The record of an open run file; `where` follows the group being read, for error messages.
RunRecord read_record(hid_t file, std::string& where) {
  RunRecord r;
  where = "/config";
  Handle config = h5::open_group(file, "config");
  for (const auto& name : h5::attribute_names(config)) {
    if (name == "threads")
      r.threads = h5::read_int_attr(config, name);
    else if (h5::attr_is_string(config, name))
      r.config[name] = h5::read_string_attr(config, name);
    else
      r.config_ints[name] = h5::read_int_attr(config, name);
  }
  where = "/status";
  Handle status = h5::open_group(file, "status");
  const std::string state = h5::read_string_attr(status, "state");
  try {
    r.state = run_state_from_string(state);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(e.what());
  }
  r.reason = h5::read_string_attr(status, "reason");
  r.status_step = h5::read_int_attr(status, "step");

  where = "/train";
  Handle train = h5::open_group(file, "train");
  r.train.step = h5::read_integers(train, "step");
  r.train.tokens = h5::read_integers(train, "tokens");
  r.train.loss = h5::read_doubles(train, "loss");
  r.train.lr = h5::read_doubles(train, "lr");
  r.train.grad_norm = h5::read_doubles(train, "grad_norm");
  r.train.seconds = h5::read_doubles(train, "seconds");
  // One row per step in every column: the record's readers index them all by step.
  for (const size_t n : {r.train.tokens.size(), r.train.loss.size(), r.train.lr.size(),
                         r.train.grad_norm.size(), r.train.seconds.size()})
    if (n != r.train.step.size())
      throw std::runtime_error(fmt::format(
          "columns of different lengths: step {}, tokens {}, loss {}, lr {}, grad_norm {}, seconds {}",
          r.train.step.size(), r.train.tokens.size(), r.train.loss.size(), r.train.lr.size(),
          r.train.grad_norm.size(), r.train.seconds.size()));

  where = "/eval";
  Handle eval = h5::open_group(file, "eval");
  for (const auto& name : h5::member_names(eval)) {
    where = "/eval/" + name;
    Handle g = h5::open_group(eval, name);
    r.eval[h5::read_int_attr(g, "context")] = read_eval_rows(g);
  }
  if (h5::exists(file, "needle")) {
    where = "/needle";
    Handle needle = h5::open_group(file, "needle");
    for (const auto& name : h5::member_names(needle)) {
      where = "/needle/" + name;
      Handle g = h5::open_group(needle, name);
      r.needle[h5::read_int_attr(g, "context")] = read_group(needle, name);
    }
  }
  if (h5::exists(file, "analysis")) {
    where = "/analysis";
    Handle analysis = h5::open_group(file, "analysis");
    for (const auto& name : h5::member_names(analysis)) {
      where = "/analysis/" + name;
      Handle g = h5::open_group(analysis, name);
      r.analysis[h5::read_int_attr(g, "context")] = read_group(g, "attention");
    }
  }
  return r;
}

}  // namespace

RunRecord read_run_file(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such run file");
  Handle file = h5::open_file(path);  // its error names the file
  std::string where = "/";
  try {
    return read_record(file, where);
  } catch (const std::exception& e) {
    // Whatever failed (HDF5, a value out of its domain), the message says which file and where.
    throw std::runtime_error(fmt::format("{}: {}: {}", path, where, e.what()));
  }
}

}  // namespace results
