// A checkpoint written on a GPU loads on a machine without one. No GPU here, so the test makes
// such a file: it rewrites a CPU checkpoint's pickled storage locations from 'cpu' to 'cuda:0',
// which is exactly what LibTorch writes for CUDA tensors. Loaded as it is, that file fails on a
// CPU-only LibTorch (proving the rewrite took); the harness's loaders map it onto the model's
// device and get the same weights, for --resume and for opening a finished run (analyse, export).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "harness/config/engine_options.h"
#include "harness/config/schema.h"
#include "harness/data/dataset.h"
#include "harness/train/checkpoint.h"
#include "harness/train/finished_run.h"
#include "harness/train/trainer.h"
#include "test_support.h"

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
  const std::string original = (tmp.path / "run" / "checkpoint.pt").string();
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
  // its place it opens on the host with the same weights.
  fs::copy_file(on_gpu, original, fs::copy_options::overwrite_existing);
  auto reopened = harness::train::open_finished_run((tmp.path / "run").string());
  const auto pr = reopened.model->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pr[i].value(), pa[i].value())) << pr[i].key();
}
