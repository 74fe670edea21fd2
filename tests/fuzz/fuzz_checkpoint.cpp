// libFuzzer target: the input is the bytes of a checkpoint (checkpoint-<step>.pt, LibTorch's zip
// archive: harness/train/checkpoint.h), read as `harness train --resume` and the commands that
// open a finished run (harness/train/finished_run.cpp: analyse, generate, ...) read one:
//   RunCheckpoints::read_newest_good   the input as checkpoint-4.pt in a scratch run folder
//                                      (/dev/shm, one per process), listed in checkpoints.tsv with
//                                      its size and CRC-32: the bytes come back as written
//   load_checkpoint(bytes, model, optim)  into a fresh model and optimisers built from
//                                      tests/fuzz/checkpoint.yaml (what --resume does), then, when
//                                      it succeeded, the training stream seeks to its cursor,
//                                      draws a batch and the model runs it forward
//   load_model_weights(bytes, model)   the model's entries only (open_finished_run)
//   RunCheckpoints::read_newest_good   the input as a second folder's checkpoints.tsv (the list's
//                                      parser), beside one small checkpoint file
//
// Expected: a load, or an exception the command line reports and exits 1 on: c10::Error
// (LibTorch's) or std::runtime_error (ours; for the list: naming the list or the folder). A
// finding is a crash or sanitizer report, any other exception type, a load that succeeds but
// changes a parameter's or buffer's shape or dtype (the model would then fail or compute with
// other shapes later), a loaded state the first training step cannot use, a hang or a huge
// allocation. Crashes inside LibTorch's own code on memory it owns are LibTorch's
// (scripts/fuzz_triage.py keeps them apart). docs/fuzzing.md.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>

#include "fuzz_scratch.h"
#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "harness/data/windows.h"
#include "harness/train/checkpoint.h"
#include "harness/train/finished_run.h"

namespace fs = std::filesystem;
using namespace harness;

namespace {

std::string g_scratch, g_run_dir, g_list_dir;
std::unique_ptr<config::LoadedConfig> g_config;
constexpr int64_t kVocab = 256;  // the byte tokenizer's (tests/fuzz/checkpoint.yaml's corpus)

[[noreturn]] void finding(const char* reader, const std::string& what) { fuzz::finding("fuzz_checkpoint", reader, what); }

void write_file(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  if (!out) finding("setup", "cannot write " + path);
}

// Runs `f`: true when it returned; false on an error the command line reports (c10::Error,
// std::runtime_error, whose message must contain `must_name` when given).
template <class F>
bool load(const char* reader, F&& f, const std::string& must_name = "") {
  try {
    f();
    return true;
  } catch (const c10::Error&) {
    return false;
  } catch (const std::runtime_error& e) {
    if (!must_name.empty() && std::string(e.what()).find(must_name) == std::string::npos)
      finding(reader, "a std::runtime_error that does not name " + must_name + ": " + e.what());
    return false;
  } catch (const std::exception& e) {
    finding(reader, std::string("uncaught ") + typeid(e).name() + ": " + e.what());
  } catch (...) {
    finding(reader, "uncaught exception of a non-std type");
  }
}

struct Fresh {
  models::GPT model{nullptr};
  std::unique_ptr<models::Optimizers> optim;
};

// What --resume builds before it loads: the model and its optimisers from the config.
Fresh fresh_model() {
  torch::manual_seed(0);
  Fresh f;
  f.model = models::GPT(config::gpt_options(g_config->config, kVocab));
  f.optim = std::make_unique<models::Optimizers>(f.model, g_config->config.optim);
  return f;
}

using Shapes = std::map<std::string, std::pair<std::vector<int64_t>, c10::ScalarType>>;
Shapes shapes_of(models::GPT& model) {
  Shapes out;
  for (const auto& p : model->named_parameters()) out[p.key()] = {p.value().sizes().vec(), p.value().scalar_type()};
  for (const auto& b : model->named_buffers()) out["buffer " + b.key()] = {b.value().sizes().vec(), b.value().scalar_type()};
  return out;
}

void check_shapes(const char* reader, const Shapes& before, models::GPT& model) {
  const Shapes after = shapes_of(model);
  for (const auto& [name, was] : before) {
    const auto& now = after.at(name);
    if (now != was)
      finding(reader, fmt::format("the load succeeded and changed {} from [{}] {} to [{}] {}", name,
                                  fmt::join(was.first, ", "), c10::toString(was.second),
                                  fmt::join(now.first, ", "), c10::toString(now.second)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  spdlog::set_level(spdlog::level::off);  // the readers' warnings (a skipped checkpoint)
  g_scratch = fuzz::scratch_dir("harness-fuzz-checkpoint-");
  g_run_dir = g_scratch + "/run";
  g_list_dir = g_scratch + "/list";
  fs::create_directories(g_run_dir);
  fs::create_directories(g_list_dir);
  g_config = std::make_unique<config::LoadedConfig>(
      config::load_run_config(HARNESS_SOURCE_DIR "/tests/fuzz/checkpoint.yaml"));
  write_file(g_list_dir + "/checkpoint-2.pt", "x", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<char> input(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size);

  // The run folder: checkpoint-4.pt, listed with its own size and CRC-32.
  const train::RunCheckpoints run(g_run_dir);
  const std::string file = run.path_of(4);
  write_file(file, data, size);
  const std::string list = fmt::format("step\tbytes\tcrc32\tfile\n4\t{}\t{:08x}\tcheckpoint-4.pt\n", size,
                                       train::crc32_of(input));
  write_file(run.list_path(), list.data(), list.size());
  std::optional<train::RunCheckpoints::Read> got;
  load("read_newest_good", [&] { got = run.read_newest_good([](const std::string&) {}); });
  if (!got || got->bytes != input || got->path != file) finding("read_newest_good", "did not return the listed checkpoint");

  // --resume: the whole state into a fresh model and optimisers, then what the first step does.
  {
    Fresh f = fresh_model();
    const Shapes before = shapes_of(f.model);
    train::CheckpointState state;
    if (load("load_checkpoint", [&] { state = train::load_checkpoint(got->bytes, f.model, *f.optim); })) {
      check_shapes("load_checkpoint", before, f.model);
      const auto& c = g_config->config;
      auto tokens = std::make_shared<const std::vector<uint16_t>>(size_t(8 * (c.train.context + 1)), uint16_t(7));
      data::TrainStream stream(tokens, c.train.context, c.train.seed);
      if (load("TrainStream::seek", [&] { stream.seek(state.cursor); })) {
        const torch::Tensor batch = stream.next_batch(1);
        const auto inputs = batch.slice(1, 0, c.train.context);
        try {
          f.model->forward(inputs).sum().item<float>();
        } catch (const std::exception& e) {
          finding("forward", std::string("the loaded model cannot run: ") + e.what());
        }
      }
    }
  }
  // open_finished_run: the model's entries only.
  {
    Fresh f = fresh_model();
    const Shapes before = shapes_of(f.model);
    if (load("load_model_weights", [&] { train::load_model_weights(got->bytes, f.model); }))
      check_shapes("load_model_weights", before, f.model);
  }

  // The input as a checkpoint list (checkpoints.tsv) beside checkpoint-2.pt.
  const train::RunCheckpoints listed(g_list_dir);
  write_file(listed.list_path(), data, size);
  load("read_newest_good(list)", [&] { listed.read_newest_good([](const std::string&) {}); }, g_list_dir);
  return 0;
}
