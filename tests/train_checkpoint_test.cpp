// A checkpoint written on a GPU loads on a machine without one. No GPU here, so the test makes
// such a file: it rewrites a CPU checkpoint's pickled storage locations from 'cpu' to 'cuda:0',
// which is exactly what LibTorch writes for CUDA tensors. Loaded as it is, that file fails on a
// CPU-only LibTorch (proving the rewrite took); the harness's loaders map it onto the model's
// device and get the same weights, for --resume and for opening a finished run (analyse, export).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <caffe2/serialize/inline_container.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <filesystem>
#include <string>

#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "harness/data/dataset.h"
#include "harness/train/checkpoint.h"
#include "harness/train/finished_run.h"
#include "harness/train/trainer.h"
#include "test_support.h"
#include "train_support.h"

namespace fs = std::filesystem;

namespace {

harness::config::LoadedConfig tiny_config(const fs::path& cache) {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
                           cache.string() + "'}\n" +
                           "model: {layers: 1, d_model: 32, heads: 2}\n"
                           "attention: {method: kerple+p-rope, p_rope_base: L/4}\n"
                           "train: {context: 32, batch_size: 8, steps: 6, seed: 3}\n"
                           "eval: {contexts: [L], windows: 2}\n"
                           "run: {threads: 2}\n";
  return harness::config::load_run_config_text(yaml, "tiny.yaml", "tiny");
}

// Copies the archive at `from` to `to` with every pickled storage location 'cpu' (a BINUNICODE
// string: 'X', a 4-byte little-endian length, the bytes) replaced by 'cuda:0'. Returns how many
// were replaced.
int relocate_to_cuda(const std::string& from, const std::string& to) {
  caffe2::serialize::PyTorchStreamReader reader(from);
  caffe2::serialize::PyTorchStreamWriter writer(to);
  const std::string cpu("X\x03\x00\x00\x00" "cpu", 8), cuda("X\x06\x00\x00\x00" "cuda:0", 11);
  int replaced = 0;
  for (const auto& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;  // the writer writes its own
    auto [data, size] = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(data.get()), size);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pkl") == 0)
      for (size_t at = 0; (at = bytes.find(cpu, at)) != std::string::npos; at += cuda.size(), ++replaced)
        bytes.replace(at, cpu.size(), cuda);
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  return replaced;
}

}  // namespace

TEST(Checkpoint, WrittenOnAGpuLoadsOnTheHost) {
  test_support::TempDir tmp;
  const auto config = tiny_config(tmp.path / "cache");
  harness::train::TrainOptions o;
  o.run_dir = (tmp.path / "run").string();
  o.progress_bar = 0;
  ASSERT_EQ(harness::train::train(config, o).state, results::RunState::kDone);
  const auto listed = harness::train::RunCheckpoints((tmp.path / "run").string()).entries();
  ASSERT_EQ(listed.size(), 1u);
  const std::string original = (tmp.path / "run" / listed.back().file).string();
  const std::string on_gpu = (tmp.path / "gpu.pt").string();
  ASSERT_GT(relocate_to_cuda(original, on_gpu), 0);

  // As written, the file asks for CUDA storage: a plain load fails without a GPU.
  if (!torch::cuda::is_available()) {
    torch::serialize::InputArchive plain;
    EXPECT_THROW(plain.load_from(on_gpu), c10::Error);
  }

  // --resume's loader maps it onto the (CPU) model: the same weights and state as the original.
  harness::data::Dataset dataset(config.config.data);
  auto load = [&](const std::string& path, models::GPT& model) {
    model = models::GPT(harness::config::gpt_options(config.config, dataset.vocab_size()));
    models::Optimizers optim(model, config.config.optim);
    return harness::train::load_checkpoint(path, model, optim);
  };
  models::GPT a{nullptr}, b{nullptr};
  const auto state_a = load(original, a), state_b = load(on_gpu, b);
  EXPECT_EQ(state_b.step, state_a.step);
  EXPECT_EQ(state_b.config_hash, state_a.config_hash);
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(pb[i].value().device().is_cpu()) << pb[i].key();
    EXPECT_TRUE(torch::equal(pb[i].value(), pa[i].value())) << pb[i].key();
  }
  // The same from the bytes a data-parallel rank 0 broadcasts.
  const auto bytes = harness::train::read_file_bytes(on_gpu);
  models::Optimizers optim_b(b, config.config.optim);
  EXPECT_NO_THROW(harness::train::load_checkpoint(bytes, b, optim_b));

  // analyse / export / theory critical --run open a finished run: with the GPU's checkpoint in
  // its place (unlisted: its CRC-32 is not the one written) it opens on the host with the same weights.
  fs::copy_file(on_gpu, original, fs::copy_options::overwrite_existing);
  fs::remove(tmp.path / "run" / "checkpoints.tsv");
  auto reopened = harness::train::open_finished_run((tmp.path / "run").string());
  const auto pr = reopened.model->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pr[i].value(), pa[i].value())) << pr[i].key();
}

// The CPU generator's state travels with the checkpoint: after a load the next draws are the
// ones that followed the save, whatever was drawn in between (a step that draws — dropout, a
// sampled batch — resumes bit for bit only so).
TEST(Checkpoint, TheCpuGeneratorStateComesBackOnLoad) {
  test_support::TempDir tmp;
  const auto config = tiny_config(tmp.path / "cache");
  harness::data::Dataset dataset(config.config.data);
  models::GPT model(harness::config::gpt_options(config.config, dataset.vocab_size()));
  models::Optimizers optim(model, config.config.optim);
  torch::manual_seed(11);
  torch::rand({7});  // somewhere along the stream, not at a seed's start
  const std::string path = (tmp.path / "checkpoint-1.pt").string();
  harness::train::CheckpointState state;
  state.config_hash = "test";
  harness::train::save_checkpoint(path, model, optim, state);
  const torch::Tensor after_save = torch::rand({5});
  torch::manual_seed(12345);  // elsewhere in the stream, as a resumed process starts
  torch::rand({3});
  harness::train::load_checkpoint(path, model, optim);
  EXPECT_TRUE(torch::equal(torch::rand({5}), after_save));
}

// ---- Checkpoints you can fall back on (run.keep_checkpoints) ----

namespace {

// CRC-32 (zlib's: reflected polynomial 0xEDB88320), bit by bit: the reference for the list.
uint32_t naive_crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

harness::config::LoadedConfig checkpointing_config(const fs::path& cache) {
  const std::string yaml = std::string("data: {corpus: '") + HARNESS_TEST_DATA + "/sotu', data_dir: '" +
                           cache.string() + "'}\n" +
                           "model: {layers: 1, d_model: 32, heads: 2}\n"
                           "train: {context: 32, batch_size: 4, steps: 12, seed: 5}\n"
                           "eval: {contexts: [L], windows: 2, every: 4}\n"
                           "run: {threads: 2, checkpoint_every: 4}\n";
  return harness::config::load_run_config_text(yaml, "ckpt.yaml", "ckpt");
}

using test_support::train_run;

// An uninterrupted run's record, and a run stopped after 10 steps: its checkpoints are steps 8
// and 10 (every 4, and the stop), the newest 2 of 4, 8, 10.
struct StoppedRun {
  test_support::TempDir tmp;
  harness::config::LoadedConfig config = checkpointing_config(tmp.path / "cache");
  fs::path dir = tmp.path / "stopped";
  results::RunRecord whole;
  StoppedRun() {
    EXPECT_EQ(train_run(config, tmp.path / "whole").state, results::RunState::kDone);
    whole = results::read_run_file((tmp.path / "whole" / "run.h5").string());
    EXPECT_EQ(train_run(config, dir, false, 10).state, results::RunState::kInterrupted);
  }
  // Resumes and checks the finished run equals the uninterrupted one, row for row.
  void resume_and_expect_whole() {
    ASSERT_EQ(train_run(config, dir, true).state, results::RunState::kDone);
    const auto resumed = results::read_run_file((dir / "run.h5").string());
    ASSERT_EQ(resumed.train.step, whole.train.step);
    EXPECT_EQ(resumed.train.loss, whole.train.loss);  // bit for bit
    for (const auto& [T, rows] : whole.eval) EXPECT_EQ(resumed.eval.at(T).loss, rows.loss) << T;
  }
};

}  // namespace

TEST(Checkpoint, TheNewestTwoAreKeptEachListedWithItsSizeAndCrc32) {
  StoppedRun run;
  const auto entries = harness::train::RunCheckpoints(run.dir.string()).entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].step, 8);
  EXPECT_EQ(entries[1].step, 10);
  for (const auto& e : entries) {
    EXPECT_EQ(e.file, "checkpoint-" + std::to_string(e.step) + ".pt");
    const std::string bytes = file_bytes(run.dir / e.file);
    EXPECT_EQ(e.digest.bytes, bytes.size()) << e.file;
    EXPECT_EQ(e.digest.crc32, naive_crc32(bytes)) << e.file;
  }
  EXPECT_FALSE(fs::exists(run.dir / "checkpoint-4.pt"));  // the third newest: removed
  for (const auto& f : fs::directory_iterator(run.dir))
    EXPECT_EQ(f.path().string().find(".tmp"), std::string::npos) << f.path();
  // The list is plain text: step, bytes, CRC-32 in hex, file.
  const std::string list = test_support::read_text(run.dir / "checkpoints.tsv");
  EXPECT_NE(list.find(fmt::format("10\t{}\t{:08x}\tcheckpoint-10.pt\n", entries[1].digest.bytes,
                                  entries[1].digest.crc32)), std::string::npos) << list;
  run.resume_and_expect_whole();
}

TEST(Checkpoint, ResumeFallsBackFromATruncatedNewestCheckpoint) {
  StoppedRun run;
  const fs::path newest = run.dir / "checkpoint-10.pt";
  fs::resize_file(newest, fs::file_size(newest) / 2);
  run.resume_and_expect_whole();  // from step 8's, equal to the uninterrupted run
  const std::string log = test_support::read_text(run.dir / "train.log");
  EXPECT_NE(log.find("the checkpoint " + newest.string() + " is not usable"), std::string::npos) << log;
  EXPECT_NE(log.find("truncated"), std::string::npos) << log;
  EXPECT_NE(log.find("resuming " + run.dir.string() + " at step 8/12"), std::string::npos) << log;
}

TEST(Checkpoint, ResumeFallsBackFromABitFlippedNewestCheckpoint) {
  StoppedRun run;
  const fs::path newest = run.dir / "checkpoint-10.pt";
  std::string bytes = file_bytes(newest);
  bytes[bytes.size() / 2] ^= 0x10;  // one bit, mid-file (a tensor's data): the size is unchanged
  std::ofstream(newest, std::ios::binary | std::ios::trunc) << bytes;
  run.resume_and_expect_whole();
  const std::string log = test_support::read_text(run.dir / "train.log");
  EXPECT_NE(log.find("the checkpoint " + newest.string() + " is not usable (its CRC-32"), std::string::npos) << log;
}

TEST(Checkpoint, ResumeWithNoGoodCheckpointNamesEveryOneAndWritesNothing) {
  StoppedRun run;
  for (const char* name : {"checkpoint-8.pt", "checkpoint-10.pt"})
    fs::resize_file(run.dir / name, 100);
  const std::string before = file_bytes(run.dir / "run.h5");
  try {
    train_run(run.config, run.dir, true);
    FAIL() << "resumed without a good checkpoint";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no usable checkpoint in " + run.dir.string()), std::string::npos) << what;
    for (const char* name : {"checkpoint-8.pt", "checkpoint-10.pt"})
      EXPECT_NE(what.find((run.dir / name).string() + ": 100 bytes where"), std::string::npos) << what;
  }
  EXPECT_EQ(file_bytes(run.dir / "run.h5"), before);
}
