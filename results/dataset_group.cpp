#include "results/dataset_group.h"

#include <cstdio>
#include <stdexcept>

#include "results/hdf5_io.h"

namespace results {

std::string attribute_text(const Attribute& a) {
  if (const auto* text = std::get_if<std::string>(&a)) return *text;
  if (const auto* integer = std::get_if<int64_t>(&a)) return std::to_string(*integer);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", std::get<double>(a));
  return buffer;
}

size_t Array::row_size() const {
  size_t n = 1;
  for (size_t d = 1; d < shape.size(); ++d) n *= size_t(shape[d]);
  return n;
}

void DatasetGroup::append_row(const DatasetGroup& row) {
  for (const auto& [name, a] : row.arrays) {
    auto [it, fresh] = arrays.try_emplace(name);
    Array& mine = it->second;
    std::vector<int64_t> shape = {1};
    shape.insert(shape.end(), a.shape.begin(), a.shape.end());
    if (fresh || mine.rows() == 0) {
      mine.shape = shape;
      mine.shape[0] = 0;
    } else if (!std::equal(shape.begin() + 1, shape.end(), mine.shape.begin() + 1, mine.shape.end())) {
      throw std::invalid_argument("DatasetGroup: rows of '" + name + "' change shape");
    }
    mine.units = a.units;
    mine.values.insert(mine.values.end(), a.values.begin(), a.values.end());
    ++mine.shape[0];
  }
  for (const auto& [name, v] : row.integers) integers[name] = v;
  for (const auto& [name, u] : row.integer_units) integer_units[name] = u;
  for (const auto& [name, v] : row.attributes) attributes[name] = v;
}

void DatasetGroup::truncate_rows(size_t n) {
  for (auto& [name, a] : arrays) {
    if (a.rows() <= n) continue;
    a.values.resize(n * a.row_size());
    a.shape[0] = int64_t(n);
  }
}

void write_group(hid_t parent, const std::string& name, const DatasetGroup& group) {
  h5::Handle g = h5::create_group(parent, name);
  for (const auto& [key, value] : group.attributes) h5::write_attribute(g, key, value);
  for (const auto& [key, a] : group.arrays) {
    size_t count = 1;
    for (const auto d : a.shape) count *= size_t(d);
    if (a.shape.empty() || count != a.values.size())
      throw std::runtime_error("DatasetGroup: array '" + key + "' has " +
                               std::to_string(a.values.size()) + " values for its shape");
    h5::write_dataset(g, key, H5T_NATIVE_DOUBLE, a.values.data(),
                      std::vector<uint64_t>(a.shape.begin(), a.shape.end()), a.units);
  }
  for (const auto& [key, v] : group.integers) {
    const auto units = group.integer_units.find(key);
    h5::write_dataset(g, key, H5T_NATIVE_INT64, v.data(), {v.size()},
                      units == group.integer_units.end() ? "" : units->second);
  }
}

DatasetGroup read_group(hid_t parent, const std::string& name) {
  h5::Handle g = h5::open_group(parent, name);
  DatasetGroup out;
  for (const auto& key : h5::attribute_names(g))
    out.attributes[key] = h5::read_attribute(g, key);
  for (const auto& key : h5::member_names(g)) {
    h5::Handle ds(H5Dopen2(g, key.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + key);
    const std::string units = H5Aexists(ds, "units") > 0 ? h5::read_string_attr(ds, "units") : "";
    if (h5::dataset_is_integer(g, key)) {
      out.integers[key] = h5::read_integers(g, key);
      out.integer_units[key] = units;
    } else {
      Array a;
      for (const auto d : h5::dataset_dims(g, key)) a.shape.push_back(int64_t(d));
      a.values = h5::read_doubles(g, key);
      a.units = units;
      out.arrays[key] = std::move(a);
    }
  }
  return out;
}

}  // namespace results
