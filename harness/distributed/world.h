// Where this process stands in a data-parallel run: its rank among `size` processes, read from
// the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or, under
// Slurm's srun, from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID. No torch: parsing only.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace harness::distributed {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;          // the rank among this node's processes (picks the GPU)
  int local_size = 1;          // ranks on this node (share its cores when run.threads is 0)
  std::string master_addr;     // rank 0's host, where the rendezvous store listens
  int master_port = 0;
  std::string source = "single process";  // which variables said so, for messages
  // torchrun's static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True): its agent already hosts
  // the store on MASTER_PORT, and every rank, rank 0 included, joins it as a client.
  bool join_agent_store = false;
  // The ranks are known to be on more than one host (LOCAL_WORLD_SIZE < WORLD_SIZE, or a Slurm
  // step over several nodes): Gloo must then listen on an address the other hosts reach.
  bool spans_hosts = false;
  int restart_count = 0;       // TORCHELASTIC_RESTART_COUNT: this group's attempt under torchrun

  bool distributed() const { return size > 1; }
};

using Getenv = std::function<const char*(const char*)>;

// torchrun's variables when WORLD_SIZE is set; else Slurm's in an srun step (SLURM_STEP_ID) of
// SLURM_NTASKS > 1 tasks, with MASTER_ADDR from the environment or the step's first node
// (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, expanded by expand_hostlist), MASTER_PORT from
// the environment or slurm_port(job, step), and the ranks on this node from the step's task
// layout (SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE, at SLURM_NODEID); else one
// process. Throws harness::InputError naming the variable and its value when one is missing or
// invalid.
World world_from_environment(const Getenv& getenv = nullptr);

// The port the ranks of step `step_id` of Slurm job `job_id` meet on: 12000 + (16·job + step)
// mod 20000, below Linux's ephemeral range (32768–60999, where the kernel hands out outgoing
// ports), distinct for the steps of one job and for jobs less than 1250 ids apart.
int slurm_port(long long job_id, long long step_id = 0);

// Slurm's compressed host lists: "node[01-04,07],gpu5" → node01 … node04, node07, gpu5 (zero
// padding kept). Throws harness::InputError on a malformed list.
std::vector<std::string> expand_hostlist(const std::string& list);

// Slurm's task layouts: "2(x3),1" → 2, 2, 2, 1 (tasks per node, in node order). Throws
// harness::InputError on a malformed layout.
std::vector<int> expand_tasks_per_node(const std::string& layout);

// A network interface of this host: its name and IPv4 address.
struct Interface {
  std::string name, address;
};

// The address Gloo listens on: `route_address` (this host's address on the route towards
// MASTER_ADDR), unless the world spans hosts and that is a loopback address (Debian maps the host
// name to 127.0.1.1), which no other host reaches: then the one non-loopback interface among
// `interfaces`. Throws std::runtime_error saying to set GLOO_SOCKET_IFNAME when there is none or
// several.
std::string gloo_listen_address(const World& world, const std::string& route_address,
                                const std::vector<Interface>& interfaces);

// The variables a launched rank reads (torchrun's names), as "NAME=value" strings.
std::vector<std::string> rank_environment(const World& world);

}  // namespace harness::distributed
