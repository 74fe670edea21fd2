#include "harness/distributed/world.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"

namespace harness::distributed {

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

// strtoll of the whole of `text`, or -1.
long long whole_number(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 15) return -1;
  return std::stoll(text);
}

// Splits at commas outside brackets.
std::vector<std::string> top_level_items(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (const char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(item);
  return out;
}

}  // namespace

int slurm_port(long long job_id, long long step_id) {
  return 12000 + static_cast<int>((16 * (job_id % 20000) + step_id % 16) % 20000);
}

std::vector<std::string> expand_hostlist(const std::string& list) {
  const auto bad = [&](const std::string& why) {
    return InputError(fmt::format("Slurm host list '{}': {}", list, why));
  };
  std::vector<std::string> hosts;
  for (const std::string& item : top_level_items(list)) {
    if (item.empty()) throw bad("an empty entry");
    const auto open = item.find('[');
    if (open == std::string::npos) {
      if (item.find(']') != std::string::npos) throw bad("']' without '['");
      hosts.push_back(item);
      continue;
    }
    const auto close = item.find(']', open);
    if (close == std::string::npos) throw bad("'[' without ']'");
    const std::string prefix = item.substr(0, open), suffix = item.substr(close + 1);
    if (suffix.find('[') != std::string::npos) throw bad("more than one bracket in '" + item + "'");
    for (const std::string& range : top_level_items(item.substr(open + 1, close - open - 1))) {
      const auto dash = range.find('-');
      const std::string lo = range.substr(0, dash), hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      const long long a = whole_number(lo), b = whole_number(hi);
      if (a < 0 || b < a) throw bad("'" + range + "' is not a number or a range lo-hi");
      if (b - a > 100000) throw bad("'" + range + "' is too long a range");
      for (long long n = a; n <= b; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');  // node01
        hosts.push_back(prefix + digits + suffix);
      }
    }
  }
  return hosts;
}

std::vector<int> expand_tasks_per_node(const std::string& layout) {
  std::vector<int> out;
  for (const std::string& item : top_level_items(layout)) {
    const auto paren = item.find('(');
    const long long tasks = whole_number(item.substr(0, paren));
    long long repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')')
        throw InputError(fmt::format("Slurm task layout '{}': '{}' is not N or N(xK)", layout, item));
      repeat = whole_number(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (tasks < 1 || repeat < 1 || repeat > 100000)
      throw InputError(fmt::format("Slurm task layout '{}': '{}' is not N or N(xK)", layout, item));
    out.insert(out.end(), size_t(repeat), int(tasks));
  }
  return out;
}

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
    w.spans_hosts = local_size && *local_size && w.local_size < w.size;
    const char* agent_store = getenv("TORCHELASTIC_USE_AGENT_STORE");
    w.join_agent_store = agent_store && std::string(agent_store) == "True";
    const char* restarts = getenv("TORCHELASTIC_RESTART_COUNT");
    if (restarts && *restarts) w.restart_count = parse_int(getenv, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 20, w.source);
  } else if (ntasks && *ntasks && std::atoll(ntasks) > 1 && getenv("SLURM_STEP_ID")) {
    // A task of an srun step (the batch script itself, which has SLURM_NTASKS too, is no rank).
    w.source = "Slurm variables";
    w.size = parse_int(getenv, "SLURM_NTASKS", 1, 1 << 20, w.source);
    w.rank = parse_int(getenv, "SLURM_PROCID", 0, w.size - 1, w.source);
    w.local_rank = parse_int(getenv, "SLURM_LOCALID", 0, w.size - 1, w.source);
    // Ranks on this node: the step's layout ("2(x3),1") at this node's index. `srun --ntasks=4`
    // sets no SLURM_NTASKS_PER_NODE, so that one comes last.
    w.local_size = 1;
    for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
      const char* layout = getenv(name);
      if (!layout || !*layout) continue;
      const std::vector<int> per_node = expand_tasks_per_node(layout);
      const char* node_id = getenv("SLURM_NODEID");
      const int node = node_id && *node_id ? parse_int(getenv, "SLURM_NODEID", 0, 1 << 20, w.source) : 0;
      w.local_size = per_node[std::min<size_t>(size_t(node), per_node.size() - 1)];
      w.spans_hosts = per_node.size() > 1;
      break;
    }
  } else {
    return w;
  }
  if (w.size == 1) return w;
  const char* addr = getenv("MASTER_ADDR");
  if (addr && *addr) {
    w.master_addr = addr;
  } else if (w.source == "Slurm variables" && (getenv("SLURM_STEP_NODELIST") || getenv("SLURM_JOB_NODELIST"))) {
    // Rank 0 runs on the step's first node (a step may use a subset of the job's nodes).
    const char* list = getenv("SLURM_STEP_NODELIST") ? getenv("SLURM_STEP_NODELIST") : getenv("SLURM_JOB_NODELIST");
    w.master_addr = expand_hostlist(list).front();
  } else {
    throw InputError(fmt::format("{}: MASTER_ADDR is not set (the host of rank 0)", w.source));
  }
  const char* port = getenv("MASTER_PORT");
  const char* job = getenv("SLURM_JOB_ID");
  if (port && *port)
    w.master_port = parse_int(getenv, "MASTER_PORT", 1, 65535, w.source);
  else if (w.source == "Slurm variables" && job && *job)
    w.master_port = slurm_port(std::atoll(job), getenv("SLURM_STEP_ID") ? std::atoll(getenv("SLURM_STEP_ID")) : 0);
  else
    throw InputError(fmt::format("{}: MASTER_PORT is not set (the rendezvous port on rank 0's host)",
                                 w.source));
  return w;
}

namespace {
bool is_loopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1" || address == "localhost";
}
}  // namespace

std::string gloo_listen_address(const World& world, const std::string& route_address,
                                const std::vector<Interface>& interfaces) {
  if (!world.spans_hosts || !is_loopback(route_address)) return route_address;
  std::vector<std::string> found;
  for (const auto& i : interfaces)
    if (!is_loopback(i.address)) found.push_back(i.name + " " + i.address);
  if (found.size() == 1) return found.front().substr(found.front().find(' ') + 1);
  throw std::runtime_error(fmt::format(
      "the ranks span hosts ({}), and MASTER_ADDR={} is reached over loopback here ({}), which no "
      "other host reaches; {}: set GLOO_SOCKET_IFNAME to the interface the other hosts reach",
      world.source, world.master_addr, route_address.empty() ? "no route" : route_address,
      found.empty() ? std::string("this host has no other interface up")
                    : fmt::format("this host has several ({})", fmt::join(found, ", "))));
}

std::vector<std::string> rank_environment(const World& w) {
  return {fmt::format("RANK={}", w.rank), fmt::format("WORLD_SIZE={}", w.size),
          fmt::format("LOCAL_RANK={}", w.local_rank), fmt::format("LOCAL_WORLD_SIZE={}", w.size),
          fmt::format("MASTER_ADDR={}", w.master_addr), fmt::format("MASTER_PORT={}", w.master_port)};
}

}  // namespace harness::distributed
