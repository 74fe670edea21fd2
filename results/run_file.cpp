#include "results/run_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace results {

namespace {

constexpr int kFormatVersion = 1;

// Owns one HDF5 identifier.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    if (id_ < 0) throw std::runtime_error("HDF5: cannot " + what);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5: cannot " + what);
}

void quiet_hdf5() {
  static const bool once = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)once;
}

Handle utf8_string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "copy string type");
  check(H5Tset_size(t, H5T_VARIABLE), "set string size");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "set string charset");
  return t;
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type = utf8_string_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar space");
  Handle attr(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "create attribute " + name);
  const char* ptr = value.c_str();
  check(H5Awrite(attr, type, &ptr), "write attribute " + name);
}

void write_int_attr(hid_t obj, const std::string& name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar space");
  Handle attr(H5Acreate2(obj, name.c_str(), H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose, "create attribute " + name);
  check(H5Awrite(attr, H5T_NATIVE_INT64, &value), "write attribute " + name);
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle file_type(H5Aget_type(attr), H5Tclose, "get attribute type");
  if (H5Tis_variable_str(file_type) > 0) {
    Handle type = utf8_string_type();
    char* ptr = nullptr;
    check(H5Aread(attr, type, &ptr), "read attribute " + name);
    std::string out = ptr ? ptr : "";
    Handle space(H5Aget_space(attr), H5Sclose, "get attribute space");
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, &ptr);
    return out;
  }
  const size_t n = H5Tget_size(file_type);
  std::string out(n, '\0');
  check(H5Aread(attr, file_type, out.data()), "read attribute " + name);
  return out.substr(0, out.find('\0'));
}

int64_t read_int_attr(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  int64_t v = 0;
  check(H5Aread(attr, H5T_NATIVE_INT64, &v), "read attribute " + name);
  return v;
}

// A chunked, extendible dataset of `rows` × `cols` (cols = 0: 1-D).
void write_dataset(hid_t group, const std::string& name, hid_t mem_type, const void* data,
                   size_t rows, size_t cols, const std::string& units) {
  const int rank = cols ? 2 : 1;
  const hsize_t dims[2] = {rows, cols};
  const hsize_t max_dims[2] = {H5S_UNLIMITED, cols};
  const hsize_t chunk[2] = {std::max<hsize_t>(1, std::min<hsize_t>(rows ? rows : 1, 4096)),
                            std::max<hsize_t>(1, cols)};
  Handle space(H5Screate_simple(rank, dims, max_dims), H5Sclose, "create space for " + name);
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "create dataset properties");
  check(H5Pset_chunk(props, rank, chunk), "set chunking of " + name);
  const hid_t file_type = mem_type == H5T_NATIVE_INT64 ? H5T_STD_I64LE : H5T_IEEE_F64LE;
  Handle ds(H5Dcreate2(group, name.c_str(), file_type, space, H5P_DEFAULT, props, H5P_DEFAULT),
            H5Dclose, "create dataset " + name);
  if (rows && (cols || rank == 1))
    check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
  write_string_attr(ds, "units", units);
}

void write_column(hid_t g, const std::string& name, const std::vector<int64_t>& v,
                  const std::string& units) {
  write_dataset(g, name, H5T_NATIVE_INT64, v.data(), v.size(), 0, units);
}
void write_column(hid_t g, const std::string& name, const std::vector<double>& v,
                  const std::string& units) {
  write_dataset(g, name, H5T_NATIVE_DOUBLE, v.data(), v.size(), 0, units);
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
  write_dataset(g, name, H5T_NATIVE_DOUBLE, flat.data(), m.size(), std::max<size_t>(cols, 1),
                units);
}

template <class T>
std::vector<T> read_column(hid_t g, const std::string& name, hid_t mem_type) {
  Handle ds(H5Dopen2(g, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle space(H5Dget_space(ds), H5Sclose, "get space of " + name);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  std::vector<T> out(dims[0]);
  if (!out.empty()) check(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read " + name);
  return out;
}

std::vector<std::vector<double>> read_matrix(hid_t g, const std::string& name) {
  Handle ds(H5Dopen2(g, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle space(H5Dget_space(ds), H5Sclose, "get space of " + name);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  std::vector<double> flat(dims[0] * dims[1]);
  if (!flat.empty())
    check(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, flat.data()), "read " + name);
  std::vector<std::vector<double>> out(dims[0]);
  for (hsize_t r = 0; r < dims[0]; ++r)
    out[r].assign(flat.begin() + r * dims[1], flat.begin() + (r + 1) * dims[1]);
  return out;
}

Handle create_group(hid_t parent, const std::string& name) {
  return Handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                "create group " + name);
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Attribute names of an object (H5Aiterate2 exists unchanged in HDF5 1.10 to 1.14).
std::vector<std::string> attribute_names(hid_t obj) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names), "list attributes");
  return names;
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
    rows.step.resize(m);
    rows.loss.resize(m);
    rows.position_loss.resize(std::min(m, rows.position_loss.size()));
    rows.score_std.resize(std::min(m, rows.score_std.size()));
  }
}

void publish(const RunRecord& r, const std::string& path) {
  quiet_hdf5();
  const std::string tmp = path + ".tmp";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose,
                "create " + tmp);
    write_int_attr(file, "format_version", kFormatVersion);

    Handle config = create_group(file, "config");
    for (const auto& [key, value] : r.config) write_string_attr(config, key, value);
    write_int_attr(config, "threads", r.threads);

    Handle status = create_group(file, "status");
    write_string_attr(status, "state", to_string(r.state));
    write_string_attr(status, "reason", r.reason);
    write_int_attr(status, "step", r.status_step);

    Handle train = create_group(file, "train");
    write_column(train, "step", r.train.step, "optimiser steps completed");
    write_column(train, "tokens", r.train.tokens, "training tokens seen");
    write_column(train, "loss", r.train.loss, "nats/token");
    write_column(train, "lr", r.train.lr, "learning-rate factor of the schedule (1 = base)");
    write_column(train, "grad_norm", r.train.grad_norm, "global L2 norm before clipping");
    write_column(train, "seconds", r.train.seconds, "s since the run started (excluding eval)");

    Handle eval = create_group(file, "eval");
    for (const auto& [context, rows] : r.eval) {
      Handle g = create_group(eval, std::to_string(context));
      write_int_attr(g, "context", context);
      write_column(g, "step", rows.step, "optimiser steps completed");
      write_column(g, "loss", rows.loss, "nats/token");
      write_matrix(g, "position_loss", rows.position_loss,
                   "nats/token, per equal-width bucket of window positions");
      write_matrix(g, "score_std", rows.score_std, "std of raw scores scale*q.k, per layer");
    }
    check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush " + tmp);
  }
  fsync_path(tmp);
  std::filesystem::rename(tmp, path);
  fsync_path(std::filesystem::path(path).parent_path().string());
}

RunRecord read_run_file(const std::string& path) {
  quiet_hdf5();
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such run file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, "open " + path);
  RunRecord r;
  Handle config(H5Gopen2(file, "config", H5P_DEFAULT), H5Gclose, "open /config");
  for (const auto& name : attribute_names(config)) {
    if (name == "threads")
      r.threads = read_int_attr(config, name);
    else
      r.config[name] = read_string_attr(config, name);
  }
  Handle status(H5Gopen2(file, "status", H5P_DEFAULT), H5Gclose, "open /status");
  r.state = run_state_from_string(read_string_attr(status, "state"));
  r.reason = read_string_attr(status, "reason");
  r.status_step = read_int_attr(status, "step");

  Handle train(H5Gopen2(file, "train", H5P_DEFAULT), H5Gclose, "open /train");
  r.train.step = read_column<int64_t>(train, "step", H5T_NATIVE_INT64);
  r.train.tokens = read_column<int64_t>(train, "tokens", H5T_NATIVE_INT64);
  r.train.loss = read_column<double>(train, "loss", H5T_NATIVE_DOUBLE);
  r.train.lr = read_column<double>(train, "lr", H5T_NATIVE_DOUBLE);
  r.train.grad_norm = read_column<double>(train, "grad_norm", H5T_NATIVE_DOUBLE);
  r.train.seconds = read_column<double>(train, "seconds", H5T_NATIVE_DOUBLE);

  Handle eval(H5Gopen2(file, "eval", H5P_DEFAULT), H5Gclose, "open /eval");
  H5G_info_t ginfo;
  check(H5Gget_info(eval, &ginfo), "inspect /eval");
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    char name[64];
    H5Lget_name_by_idx(eval, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT);
    Handle g(H5Gopen2(eval, name, H5P_DEFAULT), H5Gclose, fmt::format("open /eval/{}", name));
    EvalRows rows;
    rows.step = read_column<int64_t>(g, "step", H5T_NATIVE_INT64);
    rows.loss = read_column<double>(g, "loss", H5T_NATIVE_DOUBLE);
    rows.position_loss = read_matrix(g, "position_loss");
    rows.score_std = read_matrix(g, "score_std");
    r.eval[read_int_attr(g, "context")] = std::move(rows);
  }
  return r;
}

}  // namespace results
