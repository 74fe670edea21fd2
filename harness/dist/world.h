// Where this process stands in a data-parallel run: its rank among `size` processes, read from
// the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or, under
// Slurm's srun, from SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID. No torch: parsing only.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace harness::dist {

struct World {
  int rank = 0;
  int size = 1;
  int local_rank = 0;          // the rank among this node's processes (picks the GPU)
  int local_size = 1;          // ranks on this node (share its cores when run.threads is 0)
  std::string master_addr;     // rank 0's host, where the rendezvous store listens
  int master_port = 0;
  std::string source = "single process";  // which variables said so, for messages

  bool distributed() const { return size > 1; }
};

using Getenv = std::function<const char*(const char*)>;

// torchrun's variables when WORLD_SIZE is set; else Slurm's in an srun step (SLURM_STEP_ID) of
// SLURM_NTASKS > 1 tasks, with
// MASTER_ADDR from the environment or the job's first node (`scontrol show hostnames`) and
// MASTER_PORT from the environment or derived from SLURM_JOB_ID (slurm_port); else one process.
// Throws harness::InputError naming the variable and its value when one is missing or invalid.
World world_from_environment(const Getenv& getenv = nullptr);

// The port the ranks of Slurm job `job_id` meet on: 20000 + job_id mod 20000 (two jobs sharing a
// node collide only when their ids are 20000 apart).
int slurm_port(long long job_id);

// The variables a launched rank reads (torchrun's names), as "NAME=value" strings.
std::vector<std::string> rank_environment(const World& world);

}  // namespace harness::dist
