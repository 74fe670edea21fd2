#include "results/hdf5_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace results::h5 {

namespace {
// The operating system's word for why HDF5's last call failed ("No space left on device"), as
// its file driver records it in the error stack ("... errno = 28, error message = '...'"); ""
// when the failure was not the system's.
std::string system_cause() {
  std::string cause;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD,
           [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
             auto& out = *static_cast<std::string*>(data);
             const std::string desc = e && e->desc ? e->desc : "";
             const std::string key = "error message = '";
             const size_t at = desc.find(key);
             if (out.empty() && at != std::string::npos) {
               const size_t from = at + key.size(), to = desc.find('\'', from);
               out = desc.substr(from, to == std::string::npos ? std::string::npos : to - from);
             }
             return 0;
           },
           &cause);
  return cause;
}

[[noreturn]] void fail(const std::string& what) {
  const std::string cause = system_cause();
  throw std::runtime_error("HDF5: cannot " + what + (cause.empty() ? "" : ": " + cause));
}
}  // namespace

Handle::Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
  if (id_ < 0) fail(what);
}

herr_t Handle::close() {
  const herr_t status = id_ >= 0 ? close_(id_) : 0;
  id_ = -1;
  return status;
}

void check(herr_t status, const std::string& what) {
  if (status < 0) fail(what);
}

void quiet() {
  static const bool once = [] { return H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0; }();
  (void)once;
}

namespace {

Handle utf8_string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose, "copy string type");
  check(H5Tset_size(t, H5T_VARIABLE), "set string size");
  check(H5Tset_cset(t, H5T_CSET_UTF8), "set string charset");
  return t;
}

// Returns 0, or the errno of a failed fsync (a file whose data could not reach the disk).
int fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 0;
  const int error = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  return error;
}

}  // namespace

Handle create_group(hid_t parent, const std::string& name) {
  return Handle(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                "create group " + name);
}

Handle open_group(hid_t parent, const std::string& name) {
  return Handle(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), H5Gclose, "open group " + name);
}

bool exists(hid_t parent, const std::string& name) {
  return H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0;
}

std::vector<std::string> member_names(hid_t group) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), "inspect a group");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check(size < 0 ? -1 : 0, "read a member name");
    std::string name(size_t(size) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(size_t(size));
    names.push_back(name);
  }
  return names;
}

// H5Aiterate2 exists unchanged in HDF5 1.10 to 1.14.
std::vector<std::string> attribute_names(hid_t obj) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names), "list attributes");
  return names;
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

void write_double_attr(hid_t obj, const std::string& name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "create scalar space");
  Handle attr(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose, "create attribute " + name);
  check(H5Awrite(attr, H5T_NATIVE_DOUBLE, &value), "write attribute " + name);
}

namespace {
// Opens attribute `name`, which must hold one value (a scalar, or a simple space of one element):
// the readers below read into room for one, and HDF5 writes every element it holds.
Handle open_single_attr(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle space(H5Aget_space(attr), H5Sclose, "get space of attribute " + name);
  const hssize_t values = H5Sget_simple_extent_npoints(space);
  if (values != 1)
    throw std::runtime_error("attribute " + name + ": " + (values < 0 ? "an unreadable space" : std::to_string(values) + " values") +
                             ", not one");
  return attr;
}
}  // namespace

double read_double_attr(hid_t obj, const std::string& name) {
  Handle attr = open_single_attr(obj, name);
  double v = 0;
  check(H5Aread(attr, H5T_NATIVE_DOUBLE, &v), "read attribute " + name);
  return v;
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

bool attr_is_string(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle type(H5Aget_type(attr), H5Tclose, "get attribute type");
  return H5Tget_class(type) == H5T_STRING;
}

void write_attribute(hid_t obj, const std::string& name, const Attribute& value) {
  if (const auto* text = std::get_if<std::string>(&value)) write_string_attr(obj, name, *text);
  else if (const auto* integer = std::get_if<int64_t>(&value)) write_int_attr(obj, name, *integer);
  else write_double_attr(obj, name, std::get<double>(value));
}

Attribute read_attribute(hid_t obj, const std::string& name) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "open attribute " + name);
  Handle type(H5Aget_type(attr), H5Tclose, "get attribute type");
  switch (H5Tget_class(type)) {
    case H5T_STRING: return read_string_attr(obj, name);
    case H5T_INTEGER: return read_int_attr(obj, name);
    case H5T_FLOAT: return read_double_attr(obj, name);
    default: throw std::runtime_error("attribute " + name + ": not a string, integer or number");
  }
}

std::string read_string_attr(hid_t obj, const std::string& name) {
  Handle attr = open_single_attr(obj, name);
  Handle file_type(H5Aget_type(attr), H5Tclose, "get attribute type");
  if (H5Tget_class(file_type) != H5T_STRING) throw std::runtime_error("attribute " + name + ": not a string");
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
  Handle attr = open_single_attr(obj, name);
  int64_t v = 0;
  check(H5Aread(attr, H5T_NATIVE_INT64, &v), "read attribute " + name);
  return v;
}

void write_dataset(hid_t group, const std::string& name, hid_t mem_type, const void* data,
                   const std::vector<uint64_t>& dims, const std::string& units) {
  const int rank = int(dims.size());
  std::vector<hsize_t> d(dims.begin(), dims.end()), max_dims(d), chunk(d);
  max_dims[0] = H5S_UNLIMITED;
  hsize_t row = 1;
  for (int i = 1; i < rank; ++i) row *= std::max<hsize_t>(1, d[i]), chunk[i] = std::max<hsize_t>(1, d[i]);
  // About 32 K values a chunk along the rows (at least one row).
  chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(std::max<hsize_t>(d[0], 1), std::max<hsize_t>(1, 32768 / row)));
  Handle space(H5Screate_simple(rank, d.data(), max_dims.data()), H5Sclose, "create space for " + name);
  Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "create dataset properties");
  check(H5Pset_chunk(props, rank, chunk.data()), "set chunking of " + name);
  const hid_t file_type = mem_type == H5T_NATIVE_INT64 ? H5T_STD_I64LE : H5T_IEEE_F64LE;
  Handle ds(H5Dcreate2(group, name.c_str(), file_type, space, H5P_DEFAULT, props, H5P_DEFAULT),
            H5Dclose, "create dataset " + name);
  hsize_t count = 1;
  for (const auto x : d) count *= x;
  if (count) check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "write dataset " + name);
  write_string_attr(ds, "units", units);
}

std::vector<uint64_t> dataset_dims(hid_t group, const std::string& name) {
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle space(H5Dget_space(ds), H5Sclose, "get space of " + name);
  const int rank = H5Sget_simple_extent_ndims(space);
  check(rank < 0 ? -1 : 0, "get rank of " + name);
  std::vector<hsize_t> dims(size_t(rank), 0);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

bool dataset_is_integer(hid_t group, const std::string& name) {
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  Handle type(H5Dget_type(ds), H5Tclose, "get type of " + name);
  return H5Tget_class(type) == H5T_INTEGER;
}

namespace {
// The number of values of dataset `ds`, checked against what the file stores for it, before any
// buffer is sized by it: a damaged or hostile file may claim any shape. Its values must fit in
// size_t; compact and contiguous data must be exactly the shape's size (HDF5 1.10 reads a compact
// buffer of another size out of bounds); and the values may not exceed 1024 times the bytes stored
// (filters compress no better; chunks never written read as fill values) beyond 1 MiB.
size_t checked_count(hid_t ds, const std::string& name) {
  Handle space(H5Dget_space(ds), H5Sclose, "get space of " + name);
  const int rank = H5Sget_simple_extent_ndims(space);
  check(rank < 0 ? -1 : 0, "get rank of " + name);
  std::vector<hsize_t> dims(size_t(rank), 0);
  check(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "get shape of " + name);
  Handle type(H5Dget_type(ds), H5Tclose, "get type of " + name);
  const size_t type_size = H5Tget_size(type);
  if (type_size == 0) throw std::runtime_error("HDF5: dataset " + name + ": values of no size");
  uint64_t count = 1, bytes = type_size, values_bytes = sizeof(double);
  for (const hsize_t d : dims)
    if (__builtin_mul_overflow(count, uint64_t(d), &count) || count > SIZE_MAX / 8)
      throw std::runtime_error("HDF5: dataset " + name + ": its shape holds more values than memory can");
  if (__builtin_mul_overflow(bytes, count, &bytes))
    throw std::runtime_error("HDF5: dataset " + name + ": its shape holds more values than memory can");
  values_bytes *= count;  // count ≤ SIZE_MAX / 8
  if (count == 0) return 0;
  Handle props(H5Dget_create_plist(ds), H5Pclose, "get properties of " + name);
  const H5D_layout_t layout = H5Pget_layout(props);
  const uint64_t stored = H5Dget_storage_size(ds);
  if ((layout == H5D_COMPACT || (layout == H5D_CONTIGUOUS && stored != 0)) && stored != bytes)
    throw std::runtime_error("HDF5: dataset " + name + ": " + std::to_string(stored) +
                             " bytes stored for " + std::to_string(count) + " values of " +
                             std::to_string(type_size) + " bytes");
  if (values_bytes > (uint64_t(1) << 20) && values_bytes / 1024 > stored)
    throw std::runtime_error("HDF5: dataset " + name + ": " + std::to_string(count) +
                             " values, more than its " + std::to_string(stored) +
                             " bytes in the file can hold");
  return size_t(count);
}

template <class T>
std::vector<T> read_all(hid_t group, const std::string& name, hid_t mem_type) {
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  std::vector<T> out(checked_count(ds, name));
  if (!out.empty()) check(H5Dread(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "read " + name);
  return out;
}
}  // namespace

std::vector<double> read_doubles(hid_t group, const std::string& name) {
  return read_all<double>(group, name, H5T_NATIVE_DOUBLE);
}
std::vector<int64_t> read_integers(hid_t group, const std::string& name) {
  return read_all<int64_t>(group, name, H5T_NATIVE_INT64);
}

void write_array(hid_t group, const std::string& name, const std::vector<hsize_t>& dims,
                 const std::vector<double>& data, const std::string& units,
                 const std::string& description) {
  size_t count = 1;
  for (const auto d : dims) count *= size_t(d);
  if (count != data.size())
    throw std::runtime_error("HDF5: " + name + ": " + std::to_string(data.size()) + " values for its shape");
  write_dataset(group, name, H5T_NATIVE_DOUBLE, data.data(), {dims.begin(), dims.end()}, units);
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  write_string_attr(ds, "description", description);
}

void write_array(hid_t group, const std::string& name, const std::vector<hsize_t>& dims,
                 const std::vector<int64_t>& data, const std::string& units,
                 const std::string& description) {
  size_t count = 1;
  for (const auto d : dims) count *= size_t(d);
  if (count != data.size())
    throw std::runtime_error("HDF5: " + name + ": " + std::to_string(data.size()) + " values for its shape");
  write_dataset(group, name, H5T_NATIVE_INT64, data.data(), {dims.begin(), dims.end()}, units);
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose, "open dataset " + name);
  write_string_attr(ds, "description", description);
}

ArrayValues read_array(hid_t group, const std::string& name) {
  ArrayValues out;
  for (const auto d : dataset_dims(group, name)) out.dims.push_back(hsize_t(d));
  out.data = read_doubles(group, name);
  return out;
}

namespace {

// libhdf5 registers H5_term_library with atexit when it initialises, to close what is still open.
// Here nothing is: every identifier has its Handle, and publish_file builds files in memory, so
// there is nothing left to save at exit. What the handler can do is close a second time a file
// whose close failed: libhdf5 1.10.8 then crashes in H5F__close_cb (SIGSEGV after a full disk).
// Asked at load time, before anything initialises the library (asked later, it is refused).
const bool hdf5_exit_handler_off = H5dont_atexit() >= 0;

// The bytes of a new HDF5 file built by `fill`, in memory (the core driver, no backing store):
// libhdf5 never writes to the disk itself, so a full disk is met by write_new_file, with its
// errno, and never halfway through a flush or close inside libhdf5.
std::vector<char> file_image(const std::string& name, const std::function<void(hid_t file)>& fill) {
  Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "create file access properties");
  check(H5Pset_fapl_core(access, 1 << 20, /*backing_store=*/0), "build " + name + " in memory");
  Handle file(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), H5Fclose, "create " + name);
  fill(file);
  check(H5Fflush(file, H5F_SCOPE_GLOBAL), "flush " + name);
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  check(size < 0 ? -1 : 0, "size the image of " + name);
  std::vector<char> image(static_cast<size_t>(size));
  check(H5Fget_file_image(file, image.data(), image.size()) == size ? 0 : -1, "copy the image of " + name);
  check(file.close(), "close " + name);
  return image;
}

// Writes `bytes` as the new file `path` and fsyncs it; returns 0 or the errno of the failure.
int write_new_file(const std::string& path, const std::vector<char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  for (size_t done = 0; done < bytes.size() && error == 0;) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0) done += size_t(n);
    else if (n == 0) error = EIO;  // no progress on a regular file: do not loop for ever
    else if (errno != EINTR) error = errno;
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

}  // namespace

void publish_file(const std::string& path, const std::function<void(hid_t file)>& fill) {
  quiet();
  (void)hdf5_exit_handler_off;
  const std::string tmp = path + ".tmp";
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  // Any failure (a full disk, a quota, an I/O error: HDF5's, ours or the system's) leaves `path`
  // as it was and no temporary file, and names `path` and the cause.
  try {
    if (!parent.empty()) std::filesystem::create_directories(parent);
    const std::vector<char> image = file_image(tmp, fill);
    if (const int error = write_new_file(tmp, image)) throw std::runtime_error(std::strerror(error));
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path + ": " + e.what());
  }
  fsync_path(parent.empty() ? "." : parent.string());
}

namespace {

// At most `limit` characters of a name taken from a file (a hostile one may hold megabytes).
std::string shortened(std::string text, size_t limit = 200) {
  if (text.size() > limit) text = text.substr(0, limit) + "…";
  return text;
}

// What makes the dataset `ds` read another file: "" when nothing does.
std::string dataset_elsewhere(hid_t ds) {
  Handle props(H5Dget_create_plist(ds), H5Pclose, "get dataset properties");
  std::string name(1024, '\0');
  if (H5Pget_layout(props) == H5D_VIRTUAL) {
    size_t sources = 0;
    check(H5Pget_virtual_count(props, &sources), "count virtual sources");
    const ssize_t n = sources ? H5Pget_virtual_filename(props, 0, name.data(), name.size()) : -1;
    return "a virtual dataset" + (n > 0 ? " of " + shortened(name.c_str()) : std::string());
  }
  const int externals = H5Pget_external_count(props);
  check(externals, "count external files");
  if (externals == 0) return "";
  off_t offset = 0;
  hsize_t size = 0;
  const herr_t named = H5Pget_external(props, 0, name.size() - 1, name.data(), &offset, &size);
  return "stored in an external file" + (named >= 0 ? " " + shortened(name.c_str()) : std::string());
}

// What makes link `name` (under `group`) lead out of the file: "" when nothing does.
std::string link_elsewhere(hid_t group, const char* name, const H5L_info_t& info) {
  if (info.type == H5L_TYPE_SOFT) return "";  // a path inside this file
  if (info.type == H5L_TYPE_HARD) {
    Handle object(H5Oopen(group, name, H5P_DEFAULT), H5Oclose, std::string("open ") + name);
    return H5Iget_type(object) == H5I_DATASET ? dataset_elsewhere(object) : "";
  }
  if (info.type != H5L_TYPE_EXTERNAL) return "a link of user-defined class " + std::to_string(int(info.type));
  std::vector<char> value(std::min<size_t>(info.u.val_size, 1 << 16) + 1, '\0');
  unsigned flags = 0;
  const char *file = nullptr, *object = nullptr;
  const bool known = H5Lget_val(group, name, value.data(), value.size(), H5P_DEFAULT) >= 0 &&
                     H5Lunpack_elink_val(value.data(), value.size(), &flags, &file, &object) >= 0;
  return "an external link" + (known && file && object ? " to " + shortened(file) + ":" + shortened(object)
                                                       : std::string());
}

// Refuses a file with data in other files: external links, external raw storage, virtual
// datasets. libhdf5 would open those files (any path, chosen by whoever wrote the file) while a
// reader reads what looks like its own data; the walk opens objects but never follows a link
// out of the file nor reads a value. A file the walk cannot finish is refused too.
void refuse_data_in_other_files(hid_t file, const std::string& path) {
  struct Walk {
    std::string object, what, error;
  } walk;
  const auto visit = [](hid_t group, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    auto& w = *static_cast<Walk*>(data);
    try {  // nothing may be thrown through libhdf5's C frames
      w.what = link_elsewhere(group, name, *info);
      w.object = name;
      return w.what.empty() ? 0 : 1;
    } catch (const std::exception& e) {
      w.error = e.what();
      return -1;
    }
  };
  const herr_t status = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit, &walk);
  if (!walk.what.empty())
    throw std::runtime_error(path + ": refused: /" + shortened(walk.object) + " is " + walk.what +
                             "; a results file must hold its own data (HDF5 would open that file)");
  if (status < 0)
    throw std::runtime_error(path + ": refused: cannot check that it holds its own data: " +
                             (walk.error.empty() ? "HDF5: cannot list its objects" : walk.error));
}

}  // namespace

Handle open_file(const std::string& path) {
  quiet();
  if (!std::filesystem::exists(path)) throw std::runtime_error(path + ": no such file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
              "open " + path + " (not an HDF5 file?)");
  refuse_data_in_other_files(file, path);
  return file;
}

std::string file_kind(const std::string& path) {
  Handle file = open_file(path);  // its error names the file
  try {
    return has_attr(file, "kind") ? read_string_attr(file, "kind") : "";
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace results::h5
