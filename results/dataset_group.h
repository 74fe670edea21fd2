// A group of plain HDF5 datasets, held in memory: float64 arrays of any rank with their shape and
// units, int64 vectors (band edges, grids), and attributes (text, integers, numbers). What the attention statistics
// (/eval/<T>/attention, /analysis/<T>/attention) and the theory files are made of, so that one
// writer and one reader serve them all (results/hdf5_io.h), and h5py reads them without our code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
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

// An HDF5 attribute: a number is stored as a number (h5py users compare them), text as UTF-8.
using Attribute = std::variant<std::string, int64_t, double>;
// The attribute as text (integers exactly, numbers with %.17g): to compare with files written
// when every attribute was a string.
std::string attribute_text(const Attribute& a);

struct DatasetGroup {
  std::map<std::string, Array> arrays;
  std::map<std::string, std::vector<int64_t>> integers;   // 1-D int64 datasets
  std::map<std::string, std::string> integer_units;
  std::map<std::string, Attribute> attributes;            // attributes of the group

  bool empty() const { return arrays.empty() && integers.empty(); }
  // Appends `row` as one more leading index: a row array of shape S becomes (E + 1, S...) here.
  // Integers and attributes are taken from `row`. Throws std::invalid_argument when a shape
  // differs from the rows already held.
  void append_row(const DatasetGroup& row);
  // Keeps the first n leading indices of every array (resuming from a checkpoint).
  void truncate_rows(size_t n);
};

}  // namespace results
