// A group of plain HDF5 datasets, held in memory: float64 arrays of any rank with their shape and
// units, int64 vectors (band edges, grids), and string attributes. What the attention statistics
// (/eval/<T>/attention, /analysis/<T>/attention) and the theory files are made of, so that one
// writer and one reader serve them all (results/hdf5_io.h), and h5py reads them without our code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace results {

// A dense row-major float64 array.
struct Array {
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::string units;

  size_t rows() const { return shape.empty() ? 0 : size_t(shape[0]); }
  // The element count of one leading-index slice: product of shape[1:].
  size_t row_size() const;
};

struct DatasetGroup {
  std::map<std::string, Array> arrays;
  std::map<std::string, std::vector<int64_t>> integers;   // 1-D int64 datasets
  std::map<std::string, std::string> integer_units;
  std::map<std::string, std::string> attributes;          // string attributes of the group

  bool empty() const { return arrays.empty() && integers.empty(); }
  // Appends `row` as one more leading index: a row array of shape S becomes (E + 1, S...) here.
  // Integers and attributes are taken from `row`. Throws std::invalid_argument when a shape
  // differs from the rows already held.
  void append_row(const DatasetGroup& row);
  // Keeps the first n leading indices of every array (resuming from a checkpoint).
  void truncate_rows(size_t n);
};

}  // namespace results
