#include "harness/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace harness::train {

namespace {
void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Writes `archive` to `tmp` (fsynced) and returns what was written. A failed write (a full disk, a quota, an I/O error) is
// remembered, not reported to LibTorch's stream writer, whose error path ends in std::terminate
// (a second throw from its destructor: exit 134 and a frame dump); instead `tmp` is removed and
// an error names `path` and the cause.
FileDigest write_archive(torch::serialize::OutputArchive& archive, const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot write the checkpoint " + path + ": " + std::strerror(errno));
  int error = 0;
  FileDigest written_digest;
  archive.save_to([&](const void* data, size_t size) -> size_t {
    written_digest.bytes += size;
    written_digest.crc32 = crc32_update(written_digest.crc32, data, size);
    const char* p = static_cast<const char*>(data);
    for (size_t left = size; error == 0 && left > 0;) {
      const ssize_t written = ::write(fd, p, left);
      if (written < 0 && errno == EINTR) continue;
      if (written < 0) {
        error = errno;
      } else {
        p += written;
        left -= size_t(written);
      }
    }
    return size;  // as written, always: the error is ours to report
  });
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write the checkpoint " + path + ": " + std::strerror(error));
  }
  return written_digest;
}

torch::Tensor scalar(int64_t v) { return torch::tensor({v}, torch::kLong); }
int64_t read_scalar(torch::serialize::InputArchive& a, const std::string& key) {
  torch::Tensor t;
  a.read(key, t);
  return t.item<int64_t>();
}
}  // namespace

FileDigest save_checkpoint(const std::string& path, models::GPT& model, const models::Optimizers& optim,
                           const CheckpointState& state) {
  torch::serialize::OutputArchive archive;
  model->save(archive);
  optim.save(archive);
  archive.write("run_step", scalar(state.step));
  archive.write("run_tokens", scalar(state.tokens));
  archive.write("run_cursor_epoch", scalar(int64_t(state.cursor.epoch)));
  archive.write("run_cursor_position", scalar(int64_t(state.cursor.position)));
  archive.write("run_config_hash", c10::IValue(state.config_hash));
  archive.write("run_rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  const std::string tmp = path + ".tmp";
  const FileDigest written = write_archive(archive, tmp, path);
  // Read back before it counts: what reaches the file system is what was written.
  std::vector<char> back;
  try {
    back = read_file_bytes(tmp);
  } catch (const std::exception& e) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write the checkpoint " + path + ": reading it back: " + e.what());
  }
  const FileDigest read{back.size(), crc32_of(back)};
  if (read.bytes != written.bytes || read.crc32 != written.crc32) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write the checkpoint {}: read back {} bytes with CRC-32 "
                                         "{:08x}, wrote {} with {:08x}", path, read.bytes, read.crc32,
                                         written.bytes, written.crc32));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write the checkpoint " + path + ": " + ec.message());
  }
  // The rename itself survives a power cut only once the directory is on disk too.
  const auto dir = std::filesystem::path(path).parent_path();
  fsync_file(dir.empty() ? std::string(".") : dir.string());
  return written;
}

namespace {
// The entries of `archive` that `module` would load (Module::load's own walk: its parameters,
// its buffers, then each child's archive), checked against the module's shapes and dtypes.
void check_module_entries(torch::serialize::InputArchive& archive, const torch::nn::Module& module,
                          const std::string& prefix) {
  const auto check = [&](const std::string& key, const torch::Tensor& own, bool is_buffer) {
    torch::Tensor stored;
    if (!archive.try_read(key, stored, is_buffer) || !stored.defined()) return;  // Module::load says
    TORCH_CHECK(stored.sizes() == own.sizes() && stored.scalar_type() == own.scalar_type(),
                "the checkpoint's ", prefix, key, " is ", stored.sizes(), " (", stored.scalar_type(),
                "), the model's ", own.sizes(), " (", own.scalar_type(), "): a checkpoint of another "
                "model configuration");
  };
  for (const auto& p : module.named_parameters(/*recurse=*/false)) check(p.key(), p.value(), false);
  for (const auto& b : module.named_buffers(/*recurse=*/false)) check(b.key(), b.value(), true);
  for (const auto& child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    if (archive.try_read(child.key(), child_archive))
      check_module_entries(child_archive, *child.value(), prefix + child.key() + ".");
  }
}
}  // namespace

void load_model_state(torch::serialize::InputArchive& archive, models::GPT& model) {
  check_module_entries(archive, *model, "");
  model->load(archive);
}

namespace {
CheckpointState read_checkpoint(torch::serialize::InputArchive& archive, models::GPT& model,
                                models::Optimizers& optim) {
  CheckpointState state;
  c10::IValue hash;
  archive.read("run_config_hash", hash);
  state.config_hash = hash.toStringRef();
  load_model_state(archive, model);
  optim.load(archive);
  state.step = read_scalar(archive, "run_step");
  state.tokens = read_scalar(archive, "run_tokens");
  state.cursor.epoch = uint64_t(read_scalar(archive, "run_cursor_epoch"));
  state.cursor.position = uint64_t(read_scalar(archive, "run_cursor_position"));
  torch::Tensor rng;
  archive.read("run_rng_cpu", rng);
  auto generator = at::detail::getDefaultCPUGenerator();  // a handle to the global one
  generator.set_state(rng.to(torch::kCPU));  // mapped with the rest onto the model's device
  return state;
}
}  // namespace

namespace {
// Every tensor of a checkpoint is mapped onto the model's device while it is read: one written
// on a GPU loads on a machine without one, and the other way round.
torch::Device model_device(models::GPT& model) {
  const auto params = model->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

// LibTorch's read of an archive, its errors as c10::Error (load_checkpoint_archive).
template <class F>
void read_archive(F&& load_from) {
  try {
    load_from();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "not a checkpoint LibTorch can read: ", e.what());
  }
}
}  // namespace

void load_checkpoint_archive(torch::serialize::InputArchive& archive, const std::vector<char>& bytes,
                             torch::Device device) {
  read_archive([&] { archive.load_from(bytes.data(), bytes.size(), device); });
}

CheckpointState load_checkpoint(const std::string& path, models::GPT& model,
                                models::Optimizers& optim) {
  torch::serialize::InputArchive archive;
  read_archive([&] { archive.load_from(path, model_device(model)); });
  return read_checkpoint(archive, model, optim);
}

CheckpointState load_checkpoint(const std::vector<char>& bytes, models::GPT& model,
                                models::Optimizers& optim) {
  torch::serialize::InputArchive archive;
  load_checkpoint_archive(archive, bytes, model_device(model));
  return read_checkpoint(archive, model, optim);
}

void save_checkpoint(const RunCheckpoints& checkpoints, models::GPT& model, const models::Optimizers& optim,
                     const CheckpointState& state, int64_t keep) {
  const FileDigest digest = save_checkpoint(checkpoints.path_of(state.step), model, optim, state);
  checkpoints.add(state.step, digest, keep);
}

}  // namespace harness::train
