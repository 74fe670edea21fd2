// Data-parallel training (harness/distributed): ranks are real processes of the harness executable
// talking c10d Gloo over loopback. The world from torchrun's and Slurm's variables, and two ranks
// training what one process trains (within float rounding), started by hand or by a real torchrun;
// the overlapped gradient all-reduce in one process. Faults: distributed_faults_test.cpp.
#include <gtest/gtest.h>

#include "distributed_support.h"

using namespace dist_test;

TEST(DataParallel, WorldFromTorchrunAndSlurmVariables) {
  using harness::distributed::world_from_environment;
  std::map<std::string, std::string> env;
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_FALSE(world_from_environment(getenv).distributed());
  env = {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}};
  auto w = world_from_environment(getenv);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_addr, "node7");
  EXPECT_EQ(w.master_port, 29400);
  // Slurm: an srun step's task; the port follows the job id.
  env = {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"},
         {"SLURM_NTASKS_PER_NODE", "2(x2)"}, {"SLURM_JOB_ID", "123456"}, {"MASTER_ADDR", "n1"}};
  w = world_from_environment(getenv);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.local_size, 2);
  EXPECT_EQ(w.master_port, harness::distributed::slurm_port(123456, 0));
  EXPECT_FALSE(w.join_agent_store);
  // The step's node list (not the job's), its layout at this node, a port per job and step.
  env = {{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "3"},
         {"SLURM_NODEID", "3"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_TASKS_PER_NODE", "4(x2)"},
         {"SLURM_JOB_ID", "123456"}, {"SLURM_JOB_NODELIST", "node[01-08]"},
         {"SLURM_STEP_NODELIST", "node[03-05,07]"}};
  w = world_from_environment(getenv);
  EXPECT_EQ(w.master_addr, "node03");
  EXPECT_EQ(w.local_size, 1);  // the fourth node of 2,2,2,1
  EXPECT_EQ(w.master_port, 12000 + (16 * 3456 + 3) % 20000);
  EXPECT_NE(w.master_port, harness::distributed::slurm_port(123456, 2));  // two steps of one job differ
  for (long long job : {0LL, 1LL, 19999LL, 123456LL, 9999999LL})
    for (long long step : {0LL, 15LL}) {
      const int port = harness::distributed::slurm_port(job, step);
      EXPECT_GE(port, 1024);
      EXPECT_LT(port, 32768);  // below Linux's ephemeral range
    }
  env.erase("SLURM_STEP_TASKS_PER_NODE");  // srun --ntasks=N: the job's layout
  env["SLURM_NODEID"] = "1";
  EXPECT_EQ(world_from_environment(getenv).local_size, 4);
  // torchrun's static rendezvous: join its agent's store, keys of this attempt.
  env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
         {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}};
  w = world_from_environment(getenv);
  EXPECT_TRUE(w.join_agent_store);
  EXPECT_EQ(w.restart_count, 2);
  env["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  EXPECT_FALSE(world_from_environment(getenv).join_agent_store);
  // The batch script itself (no step) is no rank.
  env = {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "1"},
         {"SLURM_JOB_NODELIST", "n[1-2]"}};
  EXPECT_FALSE(world_from_environment(getenv).distributed());
  env["SLURM_STEP_ID"] = "0";
  EXPECT_TRUE(world_from_environment(getenv).distributed());
  // Bad values name the variable.
  env = {{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}};
  try {
    world_from_environment(getenv);
    FAIL() << "RANK = WORLD_SIZE accepted";
  } catch (const harness::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='4'"), std::string::npos) << e.what();
  }
  env = {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}};
  EXPECT_THROW(world_from_environment(getenv), harness::InputError);  // no MASTER_PORT
}

TEST(DataParallel, SlurmHostListsAndTaskLayouts) {
  using harness::distributed::expand_hostlist;
  using harness::distributed::expand_tasks_per_node;
  EXPECT_EQ(expand_hostlist("node[01-04,07]"),
            (std::vector<std::string>{"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand_hostlist("gpu5"), (std::vector<std::string>{"gpu5"}));
  EXPECT_EQ(expand_hostlist("a[8-10]-ib,b1"), (std::vector<std::string>{"a8-ib", "a9-ib", "a10-ib", "b1"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (std::vector<std::string>{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4"), (std::vector<int>{4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)"), (std::vector<int>{1, 3, 3}));
  for (const char* bad : {"node[01-", "node[3-1]", "node[a]", "", "x,,y"})
    EXPECT_THROW(expand_hostlist(bad), harness::InputError) << bad;
  for (const char* bad : {"2(x)", "2(3)", "0", "x", "2(x3"})
    EXPECT_THROW(expand_tasks_per_node(bad), harness::InputError) << bad;
}

TEST(DataParallel, GlooListensWhereTheOtherHostsReachIt) {
  using harness::distributed::gloo_listen_address;
  harness::distributed::World w;
  w.size = 4;
  w.local_size = 2;
  w.spans_hosts = true;
  w.master_addr = "node1";
  w.source = "torchrun variables";
  auto one_host = w;
  one_host.spans_hosts = false;
  const std::vector<harness::distributed::Interface> lo_eth{{"lo", "127.0.0.1"}, {"eth0", "10.1.2.3"}};
  // One host: loopback is right. Several: the route's address, unless it is loopback (Debian's
  // 127.0.1.1 for the host's own name), then the one other interface.
  EXPECT_EQ(gloo_listen_address(one_host, "127.0.1.1", lo_eth), "127.0.1.1");
  EXPECT_EQ(gloo_listen_address(w, "10.1.2.3", lo_eth), "10.1.2.3");
  EXPECT_EQ(gloo_listen_address(w, "127.0.1.1", lo_eth), "10.1.2.3");
  try {
    gloo_listen_address(w, "127.0.1.1", {{"lo", "127.0.0.1"}, {"eth0", "10.1.2.3"}, {"ib0", "192.168.7.1"}});
    FAIL() << "two candidate interfaces accepted";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("GLOO_SOCKET_IFNAME"), std::string::npos) << msg;
    EXPECT_NE(msg.find("eth0 10.1.2.3, ib0 192.168.7.1"), std::string::npos) << msg;
  }
  EXPECT_THROW(gloo_listen_address(w, "127.0.1.1", {{"lo", "127.0.0.1"}}), std::runtime_error);
  // Which worlds span hosts.
  std::map<std::string, std::string> env{{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_TRUE(harness::distributed::world_from_environment(getenv).spans_hosts);
  env["LOCAL_WORLD_SIZE"] = "4";
  EXPECT_FALSE(harness::distributed::world_from_environment(getenv).spans_hosts);
  env.erase("LOCAL_WORLD_SIZE");  // not said: taken as one host
  EXPECT_FALSE(harness::distributed::world_from_environment(getenv).spans_hosts);
}

TEST(DataParallel, TwoRanksTrainWhatOneProcessTrains) {
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(20));
  const auto one = train_one_process(tmp.path, config), two = tmp.path / "two";
  ASSERT_EQ(run_harness("train --no-progress --nproc 2 --config " + config.string() + " --run-dir " + two.string(),
                    tmp.path / "two.log"), 0) << test_support::read_text(tmp.path / "two.log");
  const std::string log = test_support::read_text(tmp.path / "two.log");
  EXPECT_NE(log.find("data parallel: 2 ranks over gloo"), std::string::npos) << log;
  const auto a = results::read_run_file((two / "run.h5").string());
  const auto b = results::read_run_file((one / "run.h5").string());
  EXPECT_EQ(a.config_ints.at("world_size"), 2);
  EXPECT_EQ(b.config_ints.at("world_size"), 1);
  EXPECT_EQ(a.config.at("hash"), b.config.at("hash"));  // the world size is not in the run id
  expect_same_record(a, b, 1e-5);
  expect_same_parameters(checkpoint_parameters(config, two), checkpoint_parameters(config, one), 1e-5);
  // Only rank 0 writes the directory.
  EXPECT_FALSE(fs::exists(two / "run.h5.tmp"));
}

// A real torchrun (the pinned torch's): the static rendezvous, where torchrun's agent hosts the
// store on MASTER_PORT and rank 0 must join it, and --standalone.
TEST(DataParallel, ARealTorchrunTrainsWhatOneProcessTrains) {
  if (torchrun_command().empty()) GTEST_SKIP() << "no project Python with torchrun (scripts/install-python.sh)";
  test_support::TempDir tmp;
  const auto config = write_config(tmp.path, tiny_yaml(10));
  const auto one = train_one_process(tmp.path, config);
  const auto reference = results::read_run_file((one / "run.h5").string());
  const std::vector<std::pair<std::string, std::string>> launches = {
      {"static", "--nproc_per_node 2 --master_addr 127.0.0.1 --master_port " +
                     std::to_string(harness::distributed::free_local_port())},
      {"standalone", "--standalone --nproc_per_node 2"}};
  for (const auto& [name, rendezvous] : launches) {
    SCOPED_TRACE(name);
    const auto dir = tmp.path / name;
    const auto log = tmp.path / (name + ".log");
    const std::string cmd = torchrun_command() + " " + rendezvous + " --no_python " + HARNESS_BINARY +
                            " train --no-progress --config " + config.string() + " --run-dir " + dir.string() +
                            " > " + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << test_support::read_text(log);
    const auto a = results::read_run_file((dir / "run.h5").string());
    EXPECT_EQ(a.config_ints.at("world_size"), 2);
    expect_same_record(a, reference, 1e-5);
    expect_same_parameters(checkpoint_parameters(config, dir), checkpoint_parameters(config, one), 1e-5);
  }
}

// ---- the overlapped gradient all-reduce, in one process ----------------------------------------

namespace {
// A stand-in for W identical ranks: a sum over the ranks is W times this rank's value. Records the
// order buckets start in, and whether the backward pass was still running then.
struct FakeRanks : models::Collectives {
  int world = 2;
  bool backward_done = false;
  std::vector<int64_t> started;  // bucket sizes, in start order
  int during_backward = 0;
  int rank() const override { return 0; }
  int world_size() const override { return world; }
  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    for (auto& t : tensors) t.mul_(world);
  }
  std::function<void()> all_reduce_sum_start(torch::Tensor flat) override {
    started.push_back(flat.numel());
    if (!backward_done) ++during_backward;
    return [flat, this] { flat.mul_(world); };
  }
  std::vector<torch::Tensor> all_gather(const torch::Tensor& mine) override { return {mine, mine}; }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
};
}  // namespace

TEST(DataParallel, GradientReducerSumsEveryBucketInOrderWhileTheBackwardRuns) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 32),
                            torch::nn::ReLU(), torch::nn::Linear(32, 4));
  // Parameters without a gradient: zeros in the sum, and none after. First in the list, so they
  // are in the last bucket (an unused parameter holds back its bucket and every later one).
  torch::nn::Linear unused(4, 4);
  auto params = unused->parameters();
  for (const auto& p : net->parameters()) params.push_back(p);
  const auto x1 = torch::randn({5, 16}), x2 = torch::randn({5, 16});
  auto loss = [&](const torch::Tensor& x) { return net->forward(x).pow(2).sum(); };

  // Reference: two micro-batches accumulated, no reducer.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  loss(x1).backward();
  loss(x2).backward();
  std::vector<torch::Tensor> want;
  for (const auto& p : params) want.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());

  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  FakeRanks ranks;
  {
    harness::distributed::GradientReducer reducer(params, ranks, /*bucket_bytes=*/256);  // 4 buckets
    loss(x1).backward();  // not armed: plain accumulation
    EXPECT_TRUE(ranks.started.empty());
    reducer.arm();
    loss(x2).backward();
    ranks.backward_done = true;
    auto extra = torch::tensor({1.5, 0.0}, torch::kDouble);
    reducer.finish(extra);
    EXPECT_DOUBLE_EQ(extra[0].item<double>(), 3.0);
  }
  // Every bucket started once, in the reverse order of the parameters, most during the backward.
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  int64_t started = 0;
  for (size_t i = 0; i + 1 < ranks.started.size(); ++i) started += ranks.started[i];  // last: extra
  EXPECT_EQ(started, total);
  EXPECT_GE(ranks.started.size(), 4u);
  EXPECT_EQ(ranks.during_backward, 3) << "every bucket but the unused parameters' starts in the backward";
  for (size_t n = 0; n < params.size(); ++n) {
    ASSERT_EQ(params[n].grad().defined(), want[n].defined()) << "parameter " << n;
    if (want[n].defined()) {
      EXPECT_TRUE(params[n].grad().allclose(2 * want[n], 1e-6, 1e-7)) << "parameter " << n;
    }
  }
  // The hooks are gone with the reducer: a later backward accumulates as usual.
  const size_t starts = ranks.started.size();
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
  loss(x1).backward();
  EXPECT_EQ(ranks.started.size(), starts);
}
