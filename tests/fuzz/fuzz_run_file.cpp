// libFuzzer target: the input is the bytes of a run.h5, written to a scratch file in /dev/shm
// (one folder per process, reused by every input) and read as `harness export` / `analyse` /
// `sweep plan` read run files:
//   results::h5::file_kind        the root `kind` attribute (theory files vs run files)
//   results::read_run_file        the whole record
//   analysis::load_run_set(dir)   the run directory as export and analyse list it (its record
//                                 again, and its stored canonical config through the config
//                                 loader), only when read_run_file succeeded (else it only skips).
//
// Expected: success, or std::runtime_error whose message names the file. A finding is any crash
// or sanitizer report, any other exception type, a message without the file's path, a record
// whose columns disagree in length (what every reader of a record indexes by), an HDF5 object
// left open after the readers return, or a hang. libhdf5 itself is not instrumented: a crash
// inside it shows as a SEGV with HDF5 frames (docs/fuzzing.md says what was found there).
#include <hdf5.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "fuzz_scratch.h"
#include "analysis/run_set.h"
#include "results/hdf5_io.h"
#include "results/run_file.h"

namespace fs = std::filesystem;

namespace {

std::string g_dir, g_file;

[[noreturn]] void finding(const char* reader, const std::string& what) { fuzz::finding("fuzz_run_file", reader, what); }

template <class F>
bool read(const char* reader, F&& f) {
  try {
    f();
    return true;
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    if (message.find(g_file) == std::string::npos)
      finding(reader, "a std::runtime_error that does not name the file: " + message);
  } catch (const std::exception& e) {
    finding(reader, std::string("uncaught ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding(reader, "uncaught exception of a non-std type");
  }
  return false;
}

// Files, groups, datasets and attributes open in any file (not datatypes: HDF5's predefined
// ones count as open datatypes).
void check_no_open_objects(const char* after) {
  const ssize_t open = H5Fget_obj_count(
      H5F_OBJ_ALL, H5F_OBJ_FILE | H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_ATTR);
  if (open != 0) finding(after, std::to_string(open) + " HDF5 object(s) left open");
}

// What the record's readers index by: equal-length columns (run_file.h's layout).
void check_record(const results::RunRecord& r) {
  const size_t n = r.train.step.size();
  for (const size_t m : {r.train.tokens.size(), r.train.loss.size(), r.train.lr.size(),
                         r.train.grad_norm.size(), r.train.seconds.size()})
    if (m != n) finding("read_run_file", "a record with /train columns of different lengths");
  for (const auto& [T, rows] : r.eval) {
    const size_t e = rows.step.size();
    if (rows.loss.size() != e || rows.loss_se.size() != e || rows.windows.size() != e)
      finding("read_run_file", "a record with /eval/" + std::to_string(T) + " columns of different lengths");
    if (rows.position_loss.size() > e || rows.score_std.size() > e)
      finding("read_run_file", "a record with more /eval/" + std::to_string(T) + " matrix rows than steps");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = fuzz::scratch_dir("harness-fuzz-run-file-");
  g_file = g_dir + "/run.h5";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(g_file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    if (!out) finding("setup", "cannot write " + g_file);
  }
  read("file_kind", [] { results::h5::file_kind(g_file); });
  check_no_open_objects("file_kind");
  bool readable = read("read_run_file", [] { check_record(results::read_run_file(g_file)); });
  check_no_open_objects("read_run_file");
  if (readable) {
    // Catches its own errors into warnings (an unreadable run is skipped, never fatal).
    read("load_run_set", [] { analysis::load_run_set(g_dir); });
    check_no_open_objects("load_run_set");
  }
  return 0;
}
