#include "harness/dist/world.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <vector>

#include "harness/common/errors.h"

namespace harness::dist {

namespace {

int parse_int(const Getenv& getenv, const char* name, int min, int max, const std::string& context) {
  const char* text = getenv(name);
  if (!text || !*text)
    throw InputError(fmt::format("{}: {} is not set ({})", context, name,
                                 "set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT "
                                 "together, as torchrun does"));
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno || *end || v < min || v > max)
    throw InputError(fmt::format("{}: {}='{}' is not an integer in [{}, {}]", context, name, text,
                                 min, max));
  return static_cast<int>(v);
}

std::string first_slurm_node(const char* nodelist) {
  const std::string command = fmt::format("scontrol show hostnames '{}' 2>/dev/null", nodelist);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return "";
  char line[256] = {0};
  std::string host;
  if (std::fgets(line, sizeof line, pipe)) host = line;
  ::pclose(pipe);
  while (!host.empty() && (host.back() == '\n' || host.back() == ' ')) host.pop_back();
  return host;
}

}  // namespace

int slurm_port(long long job_id) { return 20000 + static_cast<int>(job_id % 20000); }

World world_from_environment(const Getenv& getenv_in) {
  const Getenv getenv = getenv_in ? getenv_in : [](const char* n) -> const char* { return std::getenv(n); };
  World w;
  const char* world_size = getenv("WORLD_SIZE");
  const char* ntasks = getenv("SLURM_NTASKS");
  if (world_size && *world_size) {
    w.source = "torchrun variables";
    w.size = parse_int(getenv, "WORLD_SIZE", 1, 1 << 20, w.source);
    w.rank = parse_int(getenv, "RANK", 0, w.size - 1, w.source);
    const char* local = getenv("LOCAL_RANK");
    w.local_rank = local && *local ? parse_int(getenv, "LOCAL_RANK", 0, w.size - 1, w.source) : w.rank;
    const char* local_size = getenv("LOCAL_WORLD_SIZE");
    w.local_size = local_size && *local_size ? parse_int(getenv, "LOCAL_WORLD_SIZE", 1, w.size, w.source) : 1;
  } else if (ntasks && *ntasks && std::atoll(ntasks) > 1 && getenv("SLURM_STEP_ID")) {
    // A task of an srun step (the batch script itself, which has SLURM_NTASKS too, is no rank).
    w.source = "Slurm variables";
    w.size = parse_int(getenv, "SLURM_NTASKS", 1, 1 << 20, w.source);
    w.rank = parse_int(getenv, "SLURM_PROCID", 0, w.size - 1, w.source);
    w.local_rank = parse_int(getenv, "SLURM_LOCALID", 0, w.size - 1, w.source);
    const char* per_node = getenv("SLURM_NTASKS_PER_NODE");  // "4" or "4(x2)"
    w.local_size = per_node ? std::max(1, std::atoi(per_node)) : 1;
  } else {
    return w;
  }
  if (w.size == 1) return w;
  const char* addr = getenv("MASTER_ADDR");
  if (addr && *addr) {
    w.master_addr = addr;
  } else if (w.source == "Slurm variables" && getenv("SLURM_JOB_NODELIST")) {
    w.master_addr = first_slurm_node(getenv("SLURM_JOB_NODELIST"));
    if (w.master_addr.empty())
      throw InputError(fmt::format("{}: MASTER_ADDR is not set and `scontrol show hostnames {}` "
                                   "named no node; export MASTER_ADDR (rank 0's host)",
                                   w.source, getenv("SLURM_JOB_NODELIST")));
  } else {
    throw InputError(fmt::format("{}: MASTER_ADDR is not set (the host of rank 0)", w.source));
  }
  const char* port = getenv("MASTER_PORT");
  const char* job = getenv("SLURM_JOB_ID");
  if (port && *port)
    w.master_port = parse_int(getenv, "MASTER_PORT", 1, 65535, w.source);
  else if (w.source == "Slurm variables" && job && *job)
    w.master_port = slurm_port(std::atoll(job));
  else
    throw InputError(fmt::format("{}: MASTER_PORT is not set (the rendezvous port on rank 0's host)",
                                 w.source));
  return w;
}

std::vector<std::string> rank_environment(const World& w) {
  return {fmt::format("RANK={}", w.rank), fmt::format("WORLD_SIZE={}", w.size),
          fmt::format("LOCAL_RANK={}", w.local_rank), fmt::format("LOCAL_WORLD_SIZE={}", w.size),
          fmt::format("MASTER_ADDR={}", w.master_addr), fmt::format("MASTER_PORT={}", w.master_port)};
}

}  // namespace harness::dist
