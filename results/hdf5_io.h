// The small HDF5 toolkit every results file is written and read with (run.h5, theory files):
// owned identifiers, string and integer attributes, chunked N-d datasets with a `units`
// attribute, group listing, and the temporary-file + fsync + rename publication that keeps a file
// whole whatever happens. Plain HDF5 C API (1.10 to 1.14); files stay readable by h5py.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "results/dataset_group.h"

namespace results::h5 {

// Owns one HDF5 identifier.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what);
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  operator hid_t() const { return id_; }
  herr_t close();  // closes it now (a file's last writes happen here): its status, checked

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t status, const std::string& what);  // throws std::runtime_error
void quiet();  // no HDF5 error stack on stderr: every failure is reported by exception

Handle create_group(hid_t parent, const std::string& name);
Handle open_group(hid_t parent, const std::string& name);
bool exists(hid_t parent, const std::string& name);
std::vector<std::string> member_names(hid_t group);  // links, by name
std::vector<std::string> attribute_names(hid_t obj);

void write_string_attr(hid_t obj, const std::string& name, const std::string& value);
void write_int_attr(hid_t obj, const std::string& name, int64_t value);
void write_double_attr(hid_t obj, const std::string& name, double value);
std::string read_string_attr(hid_t obj, const std::string& name);
int64_t read_int_attr(hid_t obj, const std::string& name);
double read_double_attr(hid_t obj, const std::string& name);
bool has_attr(hid_t obj, const std::string& name);
bool attr_is_string(hid_t obj, const std::string& name);
// A string, integer or floating-point scalar attribute, as its type.
void write_attribute(hid_t obj, const std::string& name, const Attribute& value);
Attribute read_attribute(hid_t obj, const std::string& name);

// A chunked dataset of `dims` (rank ≥ 1), extendible along the first dimension, with a `units`
// attribute; mem_type H5T_NATIVE_DOUBLE or H5T_NATIVE_INT64.
void write_dataset(hid_t group, const std::string& name, hid_t mem_type, const void* data,
                   const std::vector<uint64_t>& dims, const std::string& units);
std::vector<uint64_t> dataset_dims(hid_t group, const std::string& name);
bool dataset_is_integer(hid_t group, const std::string& name);
// Reads a whole dataset, converted to the memory type.
std::vector<double> read_doubles(hid_t group, const std::string& name);
std::vector<int64_t> read_integers(hid_t group, const std::string& name);

// A row-major dataset of shape `dims` with `units` and `description` attributes (the critical-
// scaling file's form), and its reading back as float64 with its shape. Throws
// std::runtime_error on a size mismatch.
void write_array(hid_t group, const std::string& name, const std::vector<hsize_t>& dims,
                 const std::vector<double>& data, const std::string& units,
                 const std::string& description);
void write_array(hid_t group, const std::string& name, const std::vector<hsize_t>& dims,
                 const std::vector<int64_t>& data, const std::string& units,
                 const std::string& description);
struct ArrayValues {
  std::vector<hsize_t> dims;
  std::vector<double> data;
};
ArrayValues read_array(hid_t group, const std::string& name);

// Writes a new file at `path` through `fill` (given the open file) as a temporary file, fsyncs it
// and renames it over `path`: readers see the old file or the new one, never a part. If `fill`
// throws, the temporary file is removed and `path` is untouched. libhdf5 builds the file in memory
// and the bytes are written here, so a failed write (a full disk) is an exception naming `path`
// and the system's cause, never a file left half closed inside libhdf5.
void publish_file(const std::string& path, const std::function<void(hid_t file)>& fill);
// Opens an existing file read-only; throws std::runtime_error naming it. A file whose data lives
// in other files (an external link, external storage, a virtual dataset) is refused before any
// of it is read: libhdf5 would open the files it names.
Handle open_file(const std::string& path);
// The root `kind` attribute of a results file ("theory-entropy", "critical-scaling"), or "" when it
// has none (run.h5). Throws std::runtime_error when `path` is not an HDF5 file.
std::string file_kind(const std::string& path);

}  // namespace results::h5

namespace results {

// Writes `group` into a new HDF5 group `name` under `parent`; arrays and integers become
// datasets with their units, attributes string attributes. Throws std::runtime_error.
void write_group(hid_t parent, const std::string& name, const DatasetGroup& group);
// Reads every dataset and string attribute of the group `name` under `parent`: float datasets
// into arrays, integer ones into integers.
DatasetGroup read_group(hid_t parent, const std::string& name);

}  // namespace results
