#include "harness/distributed/process_group.h"

#include "common/errors.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
// A pip torch's LibTorch ships no Gloo headers (Debian's comes with libgloo-dev): without them
// only the NCCL path is built.
#if defined(USE_C10D_GLOO) && __has_include(<gloo/algorithm.h>)
#define HARNESS_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <atomic>
#include <memory>
#include <thread>

// Only std::string formatting here (no fmt): this file also compiles against a pip torch's
// LibTorch alone, where the NCCL path can be built.
namespace harness::distributed {

namespace {

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds t) {
  return std::to_string(t.count() / 1000) + (t.count() % 1000 ? "." + std::to_string(t.count() % 1000 / 100) : "") + " s";
}

// The address this host uses to reach `host` (a UDP "connect" sends nothing): the interface Gloo
// must listen on. Debian maps the host name to 127.0.1.1, which no other machine can reach.
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return "";
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN] = {0};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      out = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

std::string to_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> to_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

constexpr int64_t kBucketBytes = int64_t(16) << 20;

// Consecutive runs of tensors with one dtype, each run at most kBucketBytes (or one tensor).
std::vector<std::pair<size_t, size_t>> buckets(const std::vector<torch::Tensor>& tensors) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  while (begin < tensors.size()) {
    size_t end = begin + 1;
    int64_t bytes = tensors[begin].numel() * int64_t(tensors[begin].element_size());
    while (end < tensors.size() && tensors[end].scalar_type() == tensors[begin].scalar_type() &&
           bytes + tensors[end].numel() * int64_t(tensors[end].element_size()) <= kBucketBytes) {
      bytes += tensors[end].numel() * int64_t(tensors[end].element_size());
      ++end;
    }
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors, size_t begin, size_t end,
                      const c10::Device& device) {
  std::vector<torch::Tensor> flat;
  for (size_t i = begin; i < end; ++i) flat.push_back(tensors[i].reshape({-1}));
  return torch::cat(flat).to(device).contiguous();
}

void unflatten(const torch::Tensor& flat_in, std::vector<torch::Tensor>& tensors, size_t begin, size_t end) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i = begin; i < end; ++i) {
    const int64_t n = tensors[i].numel();
    tensors[i].copy_(flat_in.slice(0, offset, offset + n).view(tensors[i].sizes()));
    offset += n;
  }
}

// This host's IPv4 interfaces that are up.
std::vector<Interface> local_interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    out.push_back({i->ifa_name, text});
  }
  ::freeifaddrs(list);
  return out;
}

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
#ifdef HARNESS_C10D_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  c10::Device device = c10::kCPU;  // where the collectives' buffers live
  // Set by the heartbeat's owner to stop it; the thread holds its own reference to the store.
  std::shared_ptr<std::atomic<bool>> stop_heartbeat = std::make_shared<std::atomic<bool>>(false);
};

namespace {
// Every second, this rank's counter under beat/<rank>: a rank blocked inside a collective still
// beats, a killed or stopped one does not, so a failure names the rank that is really gone.
void start_heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank, std::shared_ptr<std::atomic<bool>> stop) {
  std::thread([store, rank, stop] {
    for (int64_t n = 1; !stop->load(); ++n) {
      try {
        store->set("beat/" + std::to_string(rank), to_bytes(std::to_string(n)));
      } catch (...) {
        return;  // the store is gone: rank 0 has exited
      }
      for (int i = 0; i < 10 && !stop->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }).detach();  // never joined: a set() to a stopped rank 0 may block for the store's timeout
}
// Joins the TCP store on MASTER_ADDR:MASTER_PORT. Under torchrun's static rendezvous its agent
// already hosts the store on MASTER_PORT: every rank joins it as a client, as torchrun's own
// workers do. Otherwise rank 0 hosts it. Errors name the rank, the address and the likely cause.
c10::intrusive_ptr<c10d::Store> connect_store(const World& world, std::chrono::milliseconds timeout) {
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  const std::string rank_text = "rank " + std::to_string(world.rank) + " of " + std::to_string(world.size);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(world.master_port);
  store_options.isServer = world.rank == 0 && !world.join_agent_store;
  store_options.numWorkers = static_cast<std::size_t>(world.size);
  store_options.waitWorkers = true;
  store_options.timeout = timeout;
  try {
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, store_options);
    // This attempt's keys apart from an earlier (restarted) group's, under torchrun's own prefix.
    if (world.join_agent_store)
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(world.restart_count), store);
    return store;
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    if (store_options.isServer && std::string(e.what()).find("ddress already in use") != std::string::npos)
      throw PortInUse("rendezvous (" + rank_text + ", " + world.source + "): cannot listen on " + where +
                      ": the port is taken (" + why + ")");
    if (store_options.isServer)
      throw std::runtime_error("rendezvous (" + rank_text + ", " + world.source + "): listening on " + where +
                               " failed or not all " + std::to_string(world.size) +
                               " ranks arrived within " + seconds_text(timeout) +
                               " (run.dist_timeout; is the port in use, or a rank missing?): " + why);
    throw std::runtime_error("rendezvous (" + rank_text + ", " + world.source + "): no store at " + where +
                             " within " + seconds_text(timeout) +
                             (world.join_agent_store ? " (run.dist_timeout; torchrun's agent store)"
                                                     : " (run.dist_timeout; is rank 0 running, are MASTER_ADDR and MASTER_PORT right?)") +
                             ": " + why);
  }
}

// The same run on every rank: each checks in with its run id, rank 0 compares them all and posts
// the verdict the others wait for.
void check_same_run(c10d::Store& store, const World& world, const std::string& run_id) {
  try {
    store.set("run_id/" + std::to_string(world.rank), to_bytes(run_id));
    if (world.rank == 0) {
      for (int r = 1; r < world.size; ++r) {
        const std::string theirs = to_string(store.get("run_id/" + std::to_string(r)));
        if (theirs != run_id) {
          const std::string message = "rank " + std::to_string(r) + " has run id " + theirs +
                                      ", rank 0 has " + run_id +
                                      ": the ranks were given different configs";
          store.set("rendezvous", to_bytes("error: " + message));
          throw std::runtime_error("rendezvous: " + message);
        }
      }
      store.set("rendezvous", to_bytes("ok"));
    } else {
      const std::string verdict = to_string(store.get("rendezvous"));
      if (verdict != "ok") throw std::runtime_error("rendezvous: " + verdict.substr(verdict.find(' ') + 1));
    }
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind("rendezvous: ", 0) == 0) throw;
    throw std::runtime_error("rendezvous (rank " + std::to_string(world.rank) + " of " + std::to_string(world.size) +
                             ") at " + world.master_addr + ":" + std::to_string(world.master_port) + ": " + e.what());
  }
}
}  // namespace

ProcessGroup::ProcessGroup(const World& world, const std::string& run_id,
                           std::chrono::milliseconds timeout, c10::Device device)
    : world_(world), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  const std::string rank_text = "rank " + std::to_string(world_.rank) + " of " + std::to_string(world_.size);
  impl_->store = connect_store(world_, timeout_);
  check_same_run(*impl_->store, world_, run_id);

  // From here on every key is the run's own: a store shared with another run cannot mix them.
  impl_->store = c10::make_intrusive<c10d::PrefixStore>("run/" + run_id, impl_->store);
  start_heartbeat(impl_->store, world_.rank, impl_->stop_heartbeat);
  const auto prefixed = c10::make_intrusive<c10d::PrefixStore>("pg", impl_->store);
#ifdef USE_C10D_NCCL
  if (device.is_cuda()) {
    // Blocking wait: work.wait() then throws once run.dist_timeout passes, so a dead or hung rank
    // ends the group as Gloo's timeout does (without it NCCL's wait ignores the timeout). Read
    // by ProcessGroupNCCL's constructor: TORCH_NCCL_BLOCKING_WAIT (2.x), NCCL_BLOCKING_WAIT (1.13).
    // A user's own setting wins.
    ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
    ::setenv("NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout_;
    impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, world_.rank, world_.size, options);
    impl_->device = device;
    return;
  }
#endif
  if (device.is_cuda())
    throw std::runtime_error("data-parallel training on CUDA needs a LibTorch built with NCCL "
                             "(USE_C10D_NCCL); this one has Gloo only: use run.device: cpu");
#ifdef HARNESS_C10D_GLOO
  auto options = c10d::ProcessGroupGloo::Options::create(timeout_);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname && *ifname) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else {
    const std::string address =
        gloo_listen_address(world_, local_address_towards(world_.master_addr), local_interfaces());
    options->devices.push_back(address.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                               : c10d::ProcessGroupGloo::createDeviceForHostname(address));
  }
  options->threads = 1;
  try {
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, world_.rank, world_.size, options);
  } catch (const std::exception& e) {
    throw std::runtime_error("connecting the Gloo ranks (" + rank_text + ") failed within " +
                             seconds_text(timeout_) + ": " + e.what());
  }
#else
  throw std::runtime_error("data-parallel training on the CPU needs c10d's Gloo backend, and this "
                           "build has no Gloo headers (Debian: libgloo-dev)");
#endif
}

ProcessGroup::~ProcessGroup() { impl_->stop_heartbeat->store(true); }

const char* ProcessGroup::backend_name() const {
#ifdef USE_C10D_NCCL
  if (impl_->nccl) return "nccl";
#endif
  return "gloo";
}

// After a collective failed: every rank that can still reach the store checks in. A rank that
// neither checks in within a few seconds nor beats (start_heartbeat) is gone and named; one that
// beats without checking in is alive but still blocked in its own collective (it fails at its own
// timeout). The first verdict is kept in the store for the others; rank 0, which hosts the store,
// waits for such blocked ranks to check in (at most run.dist_timeout more) so that they read it
// rather than find the store gone. The store lives in rank 0: when it is gone, so is rank 0.
void ProcessGroup::fail(const char* what, const std::string& error) {
  std::string first_line = error.substr(0, error.find('\n'));
  const std::string prefix = std::string(what) + " failed on rank " + std::to_string(world_.rank) + " of " +
                             std::to_string(world_.size) + ": ";
  const auto alive_key = [](int r) { return "alive/" + std::to_string(r); };
  const auto beat_key = [](int r) { return "beat/" + std::to_string(r); };
  std::string lost;
  try {
    auto& store = *impl_->store;
    store.set(alive_key(world_.rank), to_bytes("1"));
    const auto read_beat = [&](int r) { return store.check({beat_key(r)}) ? to_string(store.get(beat_key(r))) : ""; };
    std::vector<std::string> first_beat(size_t(world_.size));
    for (int r = 0; r < world_.size; ++r) first_beat[size_t(r)] = read_beat(r);
    // Long enough to see a heartbeat move (one a second), short of the collectives' timeout.
    const auto window = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5));
    const auto deadline = Clock::now() + std::max<std::chrono::milliseconds>(window, std::chrono::milliseconds(2500));
    std::vector<int> gone, blocked;
    do {
      gone.clear();
      blocked.clear();
      for (int r = 0; r < world_.size; ++r) {
        if (store.check({alive_key(r)})) continue;
        (read_beat(r) != first_beat[size_t(r)] ? blocked : gone).push_back(r);
      }
      if (gone.empty() && blocked.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (Clock::now() < deadline);
    const auto names = [](const std::vector<int>& ranks) {
      std::string out = ranks.size() == 1 ? "rank " : "ranks ";
      for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
      return out;
    };
    if (!gone.empty())
      lost = names(gone) + " stopped answering (killed, crashed or hung longer than run.dist_timeout = " +
             seconds_text(timeout_) + ")";
    if (store.check({"verdict"})) {
      lost = to_string(store.get("verdict"));  // the first rank's, which saw the failure first
    } else if (!lost.empty()) {
      store.set("verdict", to_bytes(lost));
    }
    if (!blocked.empty() && !lost.empty()) lost += " (" + names(blocked) + " still running, blocked in the collective)";
    if (world_.rank == 0 && !blocked.empty()) {  // keep the store up until they have read the verdict
      const auto until = Clock::now() + timeout_ + std::chrono::seconds(5);
      for (int r : blocked)
        while (!store.check({alive_key(r)}) && Clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // their get("verdict")
    }
  } catch (const std::exception&) {
    lost = "rank 0 (which hosts the rendezvous store) is gone";
  }
  throw std::runtime_error(prefix + (lost.empty() ? "" : lost + "; ") + first_line);
}

template <class Op>
void ProcessGroup::run(const char* what, Op&& op) {
  const auto t0 = Clock::now();
  try {
#ifdef USE_C10D_NCCL
    if (impl_->nccl) {
      op(*impl_->nccl)->wait(timeout_);
      seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
      return;
    }
#endif
#ifdef HARNESS_C10D_GLOO
    op(*impl_->gloo)->wait(timeout_);
#endif
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
}

void ProcessGroup::all_reduce_sum(std::vector<torch::Tensor>& tensors) {
  for (const auto& [begin, end] : buckets(tensors)) {
    std::vector<torch::Tensor> flat{flatten(tensors, begin, end, impl_->device)};
    run("all-reduce", [&](auto& backend) {
      c10d::AllreduceOptions options;
      options.reduceOp = c10d::ReduceOp::SUM;
      return backend.allreduce(flat, options);
    });
    unflatten(flat[0], tensors, begin, end);
  }
}

std::function<void()> ProcessGroup::all_reduce_sum_start(torch::Tensor flat) {
  c10::intrusive_ptr<c10d::Work> work;
  std::vector<torch::Tensor> buffers{flat};
  try {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
#ifdef USE_C10D_NCCL
    if (impl_->nccl) work = impl_->nccl->allreduce(buffers, options);
#endif
#ifdef HARNESS_C10D_GLOO
    if (!work) work = impl_->gloo->allreduce(buffers, options);
#endif
  } catch (const std::exception& e) {
    fail("all-reduce", e.what());
  }
  return [this, work, buffers] {
    const auto t0 = Clock::now();
    try {
      if (work) work->wait(timeout_);
    } catch (const std::exception& e) {
      fail("all-reduce", e.what());
    }
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  };
}

void ProcessGroup::broadcast(std::vector<torch::Tensor>& tensors, int root) {
  for (const auto& [begin, end] : buckets(tensors)) {
    std::vector<torch::Tensor> flat{flatten(tensors, begin, end, impl_->device)};
    run("broadcast", [&](auto& backend) {
      c10d::BroadcastOptions options;
      options.rootRank = root;
      return backend.broadcast(flat, options);
    });
    unflatten(flat[0], tensors, begin, end);
  }
}

std::vector<torch::Tensor> ProcessGroup::all_gather(const torch::Tensor& mine) {
  std::vector<torch::Tensor> input{mine.to(impl_->device).contiguous()};
  std::vector<std::vector<torch::Tensor>> output(1);
  for (int r = 0; r < world_.size; ++r) output[0].push_back(torch::empty_like(input[0]));
  run("all-gather", [&](auto& backend) { return backend.allgather(output, input); });
  for (auto& t : output[0]) t = t.to(mine.device());
  return output[0];
}

std::vector<int64_t> ProcessGroup::all_gather_int(int64_t value) {
  const auto gathered = all_gather(torch::tensor({value}, torch::kLong));
  std::vector<int64_t> out;
  for (const auto& t : gathered) out.push_back(t.item<int64_t>());
  return out;
}

std::string ProcessGroup::share_from_rank0(const std::string& key, const std::string& value) {
  try {
    if (world_.rank == 0) {
      impl_->store->set("shared/" + key, to_bytes(value));
      return value;
    }
    return to_string(impl_->store->get("shared/" + key));
  } catch (const std::exception& e) {
    fail("waiting for rank 0", e.what());
  }
}

void ProcessGroup::wait_for_rank0(const std::string& key, std::chrono::milliseconds allowance) {
  try {
    if (world_.rank == 0) {
      impl_->store->set("done/" + key, to_bytes("1"));
      return;
    }
    impl_->store->wait({"done/" + key}, allowance);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(world_.rank) + " of " + std::to_string(world_.size) +
                             ": rank 0 did not finish " + key + " within " + seconds_text(allowance) +
                             " (10 × run.dist_timeout), or is gone: " +
                             std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
  }
}

std::vector<char> ProcessGroup::broadcast_bytes(std::vector<char> bytes, int root) {
  std::vector<torch::Tensor> size{torch::tensor({int64_t(bytes.size())}, torch::kLong)};
  broadcast(size, root);
  const int64_t n = size[0].item<int64_t>();
  auto buffer = torch::empty({n}, torch::kUInt8);
  if (world_.rank == root) std::memcpy(buffer.data_ptr(), bytes.data(), bytes.size());
  std::vector<torch::Tensor> data{buffer};
  broadcast(data, root);
  const auto cpu = data[0].to(torch::kCPU).contiguous();
  bytes.resize(static_cast<size_t>(n));
  std::memcpy(bytes.data(), cpu.data_ptr(), bytes.size());
  return bytes;
}

uint64_t bytes_checksum(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over 64-bit words, then the tail bytes
  for (const auto& t : tensors) {
    const auto c = t.detach().to(torch::kCPU).contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    const size_t n = size_t(c.numel()) * c.element_size();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, p + i, 8);
      h = (h ^ word) * 1099511628211ull;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_local_port: socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t len = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("free_local_port: cannot bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace harness::distributed
