// Regression tests for what fuzzing the readers found (make fuzz, docs/fuzzing.md): each builds
// the damaged input the fuzzer reached (a run.h5 edited with HDF5's API or patched byte by byte,
// or YAML text, inline or from tests/data/fuzz-regressions/) and checks the reader refuses it with
// an error naming the file, instead of crashing, reading out of bounds, hanging or letting another
// exception type escape.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "common/errors.h"
#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "harness/train/checkpoint.h"
#include "harness/train/finished_run.h"
#include "results/hdf5_io.h"
#include "results/run_file.h"
#include "sweeps/sweep_file.h"
#include "run_record_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using results::h5::Handle;

namespace {

// A small complete run: what publish writes.
results::RunRecord small_run() {
  results::RunRecord r = test_support::record_with_train_log("train:\n  steps: 4\n", 1, 4, 32);
  auto& e = r.eval[64];
  for (int s : {2, 4}) {
    e.step.push_back(s);
    e.loss.push_back(4.0 + s);
    e.loss_se.push_back(0.1);
    e.windows.push_back(2);
    e.position_loss.push_back({1.0 * s, 2.0 * s});
    e.score_std.push_back({0.9});
  }
  r.state = results::RunState::kDone;
  r.status_step = 4;
  return r;
}

// A published small run, opened read-write for `edit`, closed again.
template <class Edit>
std::string damaged_run(const test_support::TempDir& dir, Edit edit) {
  const std::string path = (dir.path / "run.h5").string();
  results::publish(small_run(), path);
  results::h5::quiet();
  {
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose, "open " + path);
    edit(hid_t(file));
  }
  return path;
}

// What `f` threw: its type must be Expected (std::runtime_error for a damaged run file,
// harness::InputError for a loader's input, std::runtime_error for what the command line
// reports), its message is returned.
template <class Expected, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Expected& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << typeid(e).name() << ", not the type expected: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// What read_run_file threw reading `path`: a std::runtime_error, its message.
std::string read_error(const std::string& path) {
  return error_of<std::runtime_error>([&] { results::read_run_file(path); });
}

// A small run damaged by `edit` is refused: reading it throws std::runtime_error whose message
// holds "<path>: <what>" (the file named, then the group and what is wrong). Returns the message.
template <class Edit>
std::string expect_refused(const std::string& what, Edit edit) {
  test_support::TempDir dir;
  const auto path = damaged_run(dir, edit);
  const std::string message = read_error(path);
  EXPECT_NE(message.find(path + ": " + what), std::string::npos) << message;
  return message;
}

void replace_dataset(hid_t file, const std::string& group, const std::string& name, hid_t space,
                     hid_t props, const void* data) {
  Handle g(H5Gopen2(file, group.c_str(), H5P_DEFAULT), H5Gclose, "open " + group);
  ASSERT_GE(H5Ldelete(g, name.c_str(), H5P_DEFAULT), 0);
  Handle ds(H5Dcreate2(g, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, props, H5P_DEFAULT),
            H5Dclose, "create " + name);
  if (data) {
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
  }
}

}  // namespace

// Found: every error of a damaged run file ("HDF5: cannot open dataset range_ratio") reached the
// user without the file's name, and a few not even as std::runtime_error. Now each names the file
// and the group being read.
TEST(FuzzRunFile, ErrorsNameTheFileAndTheGroup) {
  const std::string message = expect_refused("/train: ", [](hid_t file) {
    Handle train(H5Gopen2(file, "train", H5P_DEFAULT), H5Gclose, "open train");
    ASSERT_GE(H5Ldelete(train, "lr", H5P_DEFAULT), 0);
  });
  EXPECT_NE(message.find("lr"), std::string::npos) << message;
}

// Found: an unknown /status state escaped as std::invalid_argument ("unknown run state 'x'"),
// which the readers that skip unreadable runs (catching std::runtime_error) did not expect.
TEST(FuzzRunFile, UnknownStateIsARuntimeErrorNamingTheFile) {
  expect_refused("/status: unknown run state 'dona'", [](hid_t file) {
    Handle status(H5Gopen2(file, "status", H5P_DEFAULT), H5Gclose, "open status");
    ASSERT_GE(H5Adelete(status, "state"), 0);
    results::h5::write_string_attr(status, "state", "dona");
  });
}

// Found: a scalar (rank-0) /eval/<T>/position_loss threw std::out_of_range from dims.at(0).
TEST(FuzzRunFile, MatrixOfTheWrongRankIsRefused) {
  expect_refused("/eval/64: dataset position_loss: shape (), not (rows, columns", [](hid_t file) {
    Handle space(H5Screate(H5S_SCALAR), H5Sclose, "scalar space");
    const double value = 1.0;
    replace_dataset(file, "eval/64", "position_loss", space, H5P_DEFAULT, &value);
  });
}

// Found by the fuzz target's record check (columns of one length): a /train column of 3 rows for
// 4 steps was returned as read, and every reader of a record indexes the columns by step.
TEST(FuzzRunFile, ColumnsOfDifferentLengthsAreRefused) {
  expect_refused("/train: columns of different lengths: step 4, tokens 4, loss 4, lr 3,", [](hid_t file) {
    const hsize_t n = 3;
    const double lr[3] = {1, 1, 1};
    Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "space");
    replace_dataset(file, "train", "lr", space, H5P_DEFAULT, lr);
  });
}

// Found with h5py-edited seeds (f["status"].attrs["step"] = [1, 2, 3, 4]): an attribute of more
// than one value was read into room for one, and HDF5 wrote them all (ASan: stack-buffer-overflow
// in read_int_attr and read_string_attr). Every attribute read now holds exactly one value.
TEST(FuzzRunFile, AttributeOfManyValuesIsRefused) {
  expect_refused("/status: attribute step: 4 values, not one", [](hid_t file) {
    Handle status(H5Gopen2(file, "status", H5P_DEFAULT), H5Gclose, "open status");
    ASSERT_GE(H5Adelete(status, "step"), 0);
    const hsize_t n = 4;
    const int64_t values[4] = {1, 2, 3, 4};
    Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "space");
    Handle attr(H5Acreate2(status, "step", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "step");
    ASSERT_GE(H5Awrite(attr, H5T_NATIVE_INT64, values), 0);
  });
  expect_refused("/status: attribute state: 3 values, not one", [](hid_t file) {
    Handle status(H5Gopen2(file, "status", H5P_DEFAULT), H5Gclose, "open status");
    ASSERT_GE(H5Adelete(status, "state"), 0);
    const hsize_t n = 3;
    const char* values[3] = {"done", "done", "done"};
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
    ASSERT_GE(H5Tset_size(type, H5T_VARIABLE), 0);
    Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "space");
    Handle attr(H5Acreate2(status, "state", type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, "state");
    ASSERT_GE(H5Awrite(attr, type, values), 0);
  });
}

// Found: a compact dataset whose stored data is shorter than its shape (one byte of the layout
// message changed) made libhdf5 1.10 copy past its buffer (SEGV in H5VM_memcpyvv under
// H5D__contig_read). The reader now checks the stored size against the shape first.
TEST(FuzzRunFile, CompactDataShorterThanItsShapeIsRefused) {
  test_support::TempDir dir;
  const std::vector<double> loss = {1.5, 2.5, 3.5, 4.5};
  const auto path = damaged_run(dir, [&](hid_t file) {
    const hsize_t n = loss.size();
    Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "space");
    Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "properties");
    ASSERT_GE(H5Pset_layout(props, H5D_COMPACT), 0);
    replace_dataset(file, "train", "loss", space, props, loss.data());
  });
  // The layout message (version 3, class 0 = compact, 2-byte size, the data): 32 bytes → 8.
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<char> message = {3, 0, 32, 0};
  message.resize(4 + 32);
  std::memcpy(message.data() + 4, loss.data(), 32);
  const auto at = std::search(bytes.begin(), bytes.end(), message.begin(), message.end());
  ASSERT_NE(at, bytes.end()) << "no compact layout message holding the data";
  at[2] = 8;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  const std::string error = read_error(path);
  EXPECT_NE(error.find(path + ": /train: HDF5: dataset loss: 8 bytes stored for 4 values of 8 bytes"),
            std::string::npos)
      << error;
}

// Found: a dataset's shape was trusted to size the buffer it is read into: a shape of 2^40 values
// with nothing stored (chunks never written read as fill values) asked for 8 TiB, and a shape whose
// product overflows would size it too small. Now refused by what the file can hold.
TEST(FuzzRunFile, ShapeLargerThanTheFileCanHoldIsRefused) {
  expect_refused("/train: HDF5: dataset seconds: 1099511627776 values, more than its 0 bytes", [](hid_t file) {
    const hsize_t n = hsize_t(1) << 40, max = H5S_UNLIMITED, chunk = 1024;
    Handle space(H5Screate_simple(1, &n, &max), H5Sclose, "space");
    Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "properties");
    ASSERT_GE(H5Pset_chunk(props, 1, &chunk), 0);
    replace_dataset(file, "train", "seconds", space, props, nullptr);
  });
}

namespace {

const std::string kRegressions = std::string(HARNESS_TEST_DATA) + "/fuzz-regressions";

template <class Load>
std::string input_error(Load load) { return error_of<harness::InputError>(load); }

}  // namespace

// Found: a number of ~40 000 digits overflowed the stack in std::regex_match (libstdc++'s
// executor recurses once per character): parse_int, and parse_context_value's relative form.
TEST(FuzzConfig, VeryLongNumberFailsAtItsKey) {
  const std::string digits(50000, '1');
  const std::string steps = input_error(
      [&] { harness::config::load_run_config_text("train:\n  steps: " + digits + "\n", "long.yaml"); });
  EXPECT_NE(steps.find("long.yaml:2:10: train.steps: expected an integer"), std::string::npos) << steps.substr(0, 200);
  EXPECT_NE(steps.find("(50000 characters)"), std::string::npos) << steps.substr(0, 200);
  EXPECT_LT(steps.size(), 400u);  // the value is not repeated whole
  const std::string tau = input_error(
      [&] { harness::config::load_run_config_text("attention:\n  tau: " + digits + "L\n", "long.yaml"); });
  EXPECT_NE(tau.find("long.yaml:2:8: attention.tau: expected"), std::string::npos) << tau.substr(0, 200);
  EXPECT_NE(tau.find("(50001 characters)"), std::string::npos) << tau.substr(0, 200);
}

// Found: `base:` naming a directory opened and read as "", an empty config: the sweep ran every
// default instead of failing (and a base of /dev/zero would be read forever).
TEST(FuzzConfig, BaseThatIsNotAFileIsRefused) {
  const std::string path = kRegressions + "/config/base-directory.yaml";
  const std::string message = input_error([&] { harness::sweeps::load_sweep(path); });
  EXPECT_NE(message.find(path + ":3:7: base: config file '" + kRegressions + "/config/.' is a directory, not a file"),
            std::string::npos)
      << message;
  const std::string device = input_error(
      [&] { harness::sweeps::load_sweep_text("base: /dev/zero\n", kRegressions + "/config/device.yaml"); });
  EXPECT_NE(device.find("config file '/dev/zero' is a device, pipe or socket, not a file"), std::string::npos)
      << device;
}

// Found: a grid of 30 values on each of four keys expanded 810 000 runs (30 s, 2 GB) before
// anything was said. Refused from the axes' sizes, before expanding.
TEST(FuzzConfig, SweepOfTooManyRunsIsRefusedBeforeExpanding) {
  const std::string path = kRegressions + "/config/too-many-runs.yaml";
  const std::string message = input_error([&] { harness::sweeps::load_sweep(path); });
  EXPECT_EQ(message, path + ": the sweep expands to more than 10000 runs (train.seed 30 × model.layers 30 × "
                            "model.d_model 30 × train.steps 30); split it into smaller sweeps");
}

// Found by fuzz_config: a sweep named with 300 characters (one path component over NAME_MAX) threw
// std::filesystem::filesystem_error ("File name too long") out of load_sweep_text, from looking
// for its run directories. A name holds at most 255 characters, refused at its key; a run.out_dir
// the system refuses is a directory that does not exist yet, not an exception.
TEST(FuzzConfig, OverlongNameIsRefusedAndLongPathsDoNotThrow) {
  const std::string source = kRegressions + "/config/long.yaml";
  const std::string name(300, 'a');
  const std::string sweep = input_error([&] { harness::sweeps::load_sweep_text("name: " + name + "\n", source); });
  EXPECT_NE(sweep.find(source + ":1:7: name: expected a name of letters, digits, '.', '_' or '-' starting with a "
                                "letter or digit, at most 255 characters"),
            std::string::npos)
      << sweep;
  const std::string run =
      input_error([&] { harness::config::load_run_config_text("name: " + name + "\n", source); });
  EXPECT_NE(run.find(source + ":1:7: name: expected a name"), std::string::npos) << run;
  // 255 characters is a name; an out_dir with an overlong component loads (the run directory is
  // made, and fails, only when a run starts).
  const auto ok = harness::sweeps::load_sweep_text(
      "name: " + std::string(255, 'b') + "\nbase: {run: {out_dir: /tmp/" + name + "}}\n", source);
  ASSERT_EQ(ok.runs.size(), 1u);
  EXPECT_EQ(ok.runs[0].run_dir, "/tmp/" + name + "/" + std::string(255, 'b') + "/" + ok.runs[0].id);
}

// ---- fuzz_checkpoint: checkpoints.tsv and checkpoint-<step>.pt -------------------------------

namespace {

template <class F>
std::string runtime_error_of(F&& f) { return error_of<std::runtime_error>(f); }

harness::config::LoadedConfig tiny_model_config(int d_model) {
  return harness::config::load_run_config_text(
      "model: {layers: 1, d_model: " + std::to_string(d_model) + ", heads: 2}\ntrain: {context: 16}\n",
      "tiny.yaml", "tiny");
}

}  // namespace

// Found while writing fuzz_checkpoint's list input, by reading the parser (the fuzzer had not
// reached it in its first 3 minutes): a line of checkpoints.tsv whose CRC-32 field was 8
// characters but not hex threw std::invalid_argument ("stoul") out of read_newest_good, and
// `harness train --resume` said "error: stoul". One that began with hex ("1zzzzzzz") was read
// as 1, a sign taken as part of the number. The field must be 8 hex digits, or the line is
// refused naming the list and the line.
TEST(FuzzCheckpoint, ListLineWithAMalformedCrcIsRefusedNamingTheList) {
  test_support::TempDir tmp;
  const harness::train::RunCheckpoints run(tmp.path.string());
  for (const std::string crc : {"zzzzzzzz", "1zzzzzzz", "-0000001", "+1234567"}) {
    std::ofstream(run.list_path()) << "step\tbytes\tcrc32\tfile\n4\t10\t" << crc << "\tcheckpoint-4.pt\n";
    const std::string message = runtime_error_of([&] { run.read_newest_good([](const std::string&) {}); });
    EXPECT_EQ(message.rfind(run.list_path() + ":2: not a checkpoint line", 0), 0u) << crc << ": " << message;
  }
}

namespace {

// What loading `bytes` into `model` threw: a c10::Error (what --resume and open_finished_run name
// the file with), from the whole checkpoint (whole: model and optimiser) or the model's weights
// alone; its message without the backtrace.
std::string checkpoint_error(const std::vector<char>& bytes, models::GPT& model, models::Optimizers& optim,
                             bool whole) {
  const char* what = whole ? "load_checkpoint" : "load_model_weights";
  try {
    if (whole)
      harness::train::load_checkpoint(bytes, model, optim);
    else
      harness::train::load_model_weights(bytes, model);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw " << typeid(e).name() << ", not c10::Error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << what << " loaded the checkpoint";
  return "";
}

}  // namespace

// Found by fuzz_checkpoint on a seed (a checkpoint of the same config with d_model 16):
// LibTorch's Module::load takes each tensor as the archive holds it (Tensor::set_), whatever its
// shape. open_finished_run (analyse, generate, ...) loaded a d_model 16 checkpoint into a d_model 8
// model without a word; --resume changed the model's shapes before the optimiser's state refused
// it. Each parameter and buffer is now checked against the model's shape and dtype first, and the
// model is left as it was.
TEST(FuzzCheckpoint, CheckpointOfAnotherShapeIsRefusedBeforeLoading) {
  test_support::TempDir tmp;
  const auto small = tiny_model_config(8), wide = tiny_model_config(16);
  models::GPT model(harness::config::gpt_options(small.config, 256));
  models::Optimizers optim(model, small.config.optim);
  models::GPT other(harness::config::gpt_options(wide.config, 256));
  models::Optimizers other_optim(other, wide.config.optim);
  const std::string path = (tmp.path / "checkpoint-4.pt").string();
  harness::train::save_checkpoint(path, other, other_optim, {});
  const auto bytes = harness::train::read_file_bytes(path);
  const auto before = model->named_parameters()["embed.weight"].clone();

  for (const bool whole : {false, true}) {
    const std::string message = checkpoint_error(bytes, model, optim, whole);
    EXPECT_NE(message.find("the checkpoint's embed.weight is [256, 16] (Float), the model's [256, 8] (Float)"),
              std::string::npos)
        << message;
    EXPECT_TRUE(torch::equal(model->named_parameters()["embed.weight"], before));
  }
  // The model's own checkpoint still loads.
  harness::train::save_checkpoint(path, model, optim, {});
  EXPECT_NO_THROW(harness::train::load_checkpoint(harness::train::read_file_bytes(path), model, optim));
}

// Found by fuzz_checkpoint in its first minutes: a checkpoint whose TorchScript code (the archive's
// code/__torch__/*.py, which LibTorch compiles while it reads) was damaged ("__buffers__" made
// "__buff_res_") threw torch::jit::ErrorReport, which is no c10::Error: --resume passed it on
// without the checkpoint's name. Every failure to read the archive is a c10::Error now.
TEST(FuzzCheckpoint, ArchiveWhoseCodeDoesNotCompileIsACheckpointError) {
  test_support::TempDir tmp;
  const auto config = tiny_model_config(8);
  models::GPT model(harness::config::gpt_options(config.config, 256));
  models::Optimizers optim(model, config.config.optim);
  const std::string path = (tmp.path / "checkpoint-4.pt").string();
  harness::train::save_checkpoint(path, model, optim, {});
  auto bytes = harness::train::read_file_bytes(path);
  const std::string code = "__buffers__ = []", damaged = "__buff_res_ = []";
  const auto at = std::search(bytes.begin(), bytes.end(), code.begin(), code.end());
  ASSERT_NE(at, bytes.end());
  std::copy(damaged.begin(), damaged.end(), at);
  for (const bool whole : {false, true}) {
    const std::string message = checkpoint_error(bytes, model, optim, whole);
    EXPECT_EQ(message.rfind("not a checkpoint LibTorch can read: ", 0), 0u) << message;
  }
}
