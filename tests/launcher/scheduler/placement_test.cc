// Roles and ranks of srun tasks (launcher/scheduler/placement.h): default placement, server nodes, GPUs, errors.
#include "launcher/scheduler/placement.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "common/error.h"

namespace pshard::scheduler {
namespace {

using Vars = std::map<std::string, std::string>;

TaskEnv read(const Vars& v) {
  return TaskEnv::read([&](const char* k) -> const char* {
    auto it = v.find(k);
    return it == v.end() ? nullptr : it->second.c_str();
  });
}

// Every task of a step with the given node list and tasks per node, block distribution.
std::vector<TaskPlan> plan_all(const std::string& nodelist, const std::string& tpn, const Placement& p) {
  TaskEnv base = read({{"SLURM_JOB_ID", "42"},
                       {"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "1"},
                       {"SLURM_NODEID", "0"},
                       {"SLURM_LOCALID", "0"},
                       {"SLURM_JOB_NODELIST", nodelist},
                       {"SLURM_TASKS_PER_NODE", tpn}});
  base.num_tasks = 0;
  for (int t : base.tasks_per_node) base.num_tasks += t;
  std::vector<TaskPlan> out;
  int64_t proc = 0;
  for (size_t n = 0; n < base.nodes.size(); ++n) {
    for (int l = 0; l < base.tasks_per_node[n]; ++l) {
      TaskEnv e = base;
      e.node_id = static_cast<int64_t>(n);
      e.local_id = l;
      e.proc_id = proc++;
      e.node_name = base.nodes[n];
      out.push_back(plan_task(e, p));
    }
  }
  return out;
}

std::string describe(const TaskPlan& t) {
  return t.node + ":" + role_name(t.role) + std::to_string(t.rank) + (t.runs_coordinator ? "+coord" : "");
}

TEST(TaskEnv, ReadsTheStepVariablesFirst) {
  TaskEnv e = read({{"SLURM_JOB_ID", "1234"},
                    {"SLURM_STEP_ID", "3"},
                    {"SLURM_PROCID", "5"},
                    {"SLURM_NTASKS", "8"},
                    {"SLURM_STEP_NUM_TASKS", "6"},
                    {"SLURM_NODEID", "1"},
                    {"SLURM_LOCALID", "2"},
                    {"SLURM_JOB_NODELIST", "node[1-4]"},
                    {"SLURM_STEP_NODELIST", "node[2-3]"},
                    {"SLURM_TASKS_PER_NODE", "2(x4)"},
                    {"SLURM_STEP_TASKS_PER_NODE", "3(x2)"},
                    {"SLURMD_NODENAME", "node3"},
                    {"SLURM_GPUS_ON_NODE", "4"}});
  EXPECT_EQ(e.job_id, 1234);
  EXPECT_EQ(e.step_id, 3);
  EXPECT_EQ(e.proc_id, 5);
  EXPECT_EQ(e.num_tasks, 6);
  EXPECT_EQ(e.node_id, 1);
  EXPECT_EQ(e.local_id, 2);
  EXPECT_EQ(e.nodes, std::vector<std::string>({"node2", "node3"}));
  EXPECT_EQ(e.tasks_per_node, std::vector<int>({3, 3}));
  EXPECT_EQ(e.node_name, "node3");
  EXPECT_EQ(e.gpus_on_node, 4);
}

TEST(TaskEnv, MissingOrBadVariablesAreErrorsNamingThem) {
  try {
    read({{"SLURM_PROCID", "0"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_JOB_ID is not set"), std::string::npos) << e.what();
  }
  try {
    read({{"SLURM_JOB_ID", "1"}, {"SLURM_PROCID", "x"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_PROCID must be a non-negative integer, got 'x'"), std::string::npos)
        << e.what();
  }
  try {
    read({{"SLURM_JOB_ID", "1"},
          {"SLURM_PROCID", "0"},
          {"SLURM_NTASKS", "2"},
          {"SLURM_NODEID", "0"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_JOB_NODELIST", "node[1-"}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_JOB_NODELIST: host list 'node[1-'"), std::string::npos) << e.what();
  }
}

TEST(TaskEnv, WithoutTasksPerNodeAnEvenSplitIsAssumed) {
  TaskEnv e = read({{"SLURM_JOB_ID", "1"},
                    {"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "6"},
                    {"SLURM_NODEID", "0"},
                    {"SLURM_LOCALID", "0"},
                    {"SLURM_JOB_NODELIST", "a[1-3]"}});
  EXPECT_EQ(e.tasks_per_node, std::vector<int>({2, 2, 2}));
  EXPECT_EQ(e.node_name, "a1");
}

TEST(Placement, DefaultIsOneServerPerNodeAndWorkersEverywhere) {
  std::vector<TaskPlan> t = plan_all("node[1-2]", "2(x2)", Placement{});
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(describe(t[0]), "node1:server0+coord");
  EXPECT_EQ(describe(t[1]), "node1:worker0");
  EXPECT_EQ(describe(t[2]), "node2:server1");
  EXPECT_EQ(describe(t[3]), "node2:worker1");
  for (const TaskPlan& p : t) {
    EXPECT_EQ(p.num_servers, 2u);
    EXPECT_EQ(p.num_workers, 2u);
    EXPECT_EQ(p.first_node, "node1");
  }
}

TEST(Placement, UnevenNodesAndTwoServersPerNode) {
  std::vector<TaskPlan> t = plan_all("n[1-3]", "4,3,1", Placement{2, 0});
  std::vector<std::string> d;
  for (const TaskPlan& p : t) d.push_back(describe(p));
  EXPECT_EQ(d, std::vector<std::string>({"n1:server0+coord", "n1:server1", "n1:worker0", "n1:worker1", "n2:server2",
                                         "n2:server3", "n2:worker2", "n3:server4"}));
  EXPECT_EQ(t[0].num_servers, 5u);
  EXPECT_EQ(t[0].num_workers, 3u);
  EXPECT_EQ(t[3].local_role_index, 1u);
  EXPECT_EQ(t[6].local_role_index, 0u);
}

TEST(Placement, DedicatedServerNodesHoldOnlyServers) {
  std::vector<TaskPlan> t = plan_all("cn[01-03]", "2(x3)", Placement{1, 1});
  std::vector<std::string> d;
  for (const TaskPlan& p : t) d.push_back(describe(p));
  EXPECT_EQ(d, std::vector<std::string>({"cn01:server0+coord", "cn01:server1", "cn02:worker0", "cn02:worker1",
                                         "cn03:worker2", "cn03:worker3"}));
  EXPECT_EQ(t[5].local_role_index, 1u);
}

TEST(Placement, CyclicDistributionUsesNodeAndLocalIdNotProcId) {
  TaskEnv e = read({{"SLURM_JOB_ID", "7"},
                    {"SLURM_PROCID", "1"},  // cyclic: task 1 is the first task of node 2
                    {"SLURM_NTASKS", "4"},
                    {"SLURM_NODEID", "1"},
                    {"SLURM_LOCALID", "0"},
                    {"SLURM_JOB_NODELIST", "node[1-2]"},
                    {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  TaskPlan p = plan_task(e, Placement{});
  EXPECT_EQ(describe(p), "node2:server1");
}

TEST(Placement, ImpossibleLayoutsAreErrors) {
  EXPECT_THROW(plan_all("node1", "1", Placement{}), Error);              // one task: no worker
  EXPECT_THROW(plan_all("node[1-2]", "1(x2)", Placement{}), Error);      // every task a server
  EXPECT_THROW(plan_all("node[1-2]", "2(x2)", Placement{1, 2}), Error);  // every node a server node
  EXPECT_THROW(plan_all("node[1-2]", "2(x2)", Placement{0, 0}), Error);
  try {
    plan_all("node[1-2]", "1(x2)", Placement{});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no task is left for a worker"), std::string::npos) << e.what();
  }
  TaskEnv e = read({{"SLURM_JOB_ID", "7"},
                    {"SLURM_PROCID", "0"},
                    {"SLURM_NTASKS", "5"},
                    {"SLURM_NODEID", "0"},
                    {"SLURM_LOCALID", "0"},
                    {"SLURM_JOB_NODELIST", "node[1-2]"},
                    {"SLURM_TASKS_PER_NODE", "2(x2)"}});
  EXPECT_THROW(plan_task(e, Placement{}), Error);  // 5 tasks != 2 + 2
  e.num_tasks = 4;
  e.local_id = 2;
  EXPECT_THROW(plan_task(e, Placement{}), Error);  // local id outside the node
  e.local_id = 0;
  e.node_id = 2;
  EXPECT_THROW(plan_task(e, Placement{}), Error);  // node id outside the list
}

TEST(Placement, CoordinatorPortIsDerivedFromTheJob) {
  EXPECT_EQ(coordinator_port(0, 0), 10000);
  EXPECT_EQ(coordinator_port(1, 0), 10008);
  EXPECT_EQ(coordinator_port(1, 1), 10009);
  EXPECT_EQ(coordinator_port(2499, 7), 29999);
  EXPECT_EQ(coordinator_port(2500, 0), 10000);
  EXPECT_NE(coordinator_port(123456, 0), coordinator_port(123457, 0));
}

TEST(Placement, GpusByLocalWorkerIndex) {
  TaskEnv e;
  EXPECT_EQ(worker_gpu(e, 0), "");  // no GPUs
  e.gpus_on_node = 4;
  EXPECT_EQ(worker_gpu(e, 0), "0");
  EXPECT_EQ(worker_gpu(e, 3), "3");
  EXPECT_EQ(worker_gpu(e, 5), "1");  // more workers than GPUs: shared round-robin
  e.cuda_visible_devices = "2,5";    // SLURM's own binding wins
  EXPECT_EQ(worker_gpu(e, 0), "2");
  EXPECT_EQ(worker_gpu(e, 1), "5");
  EXPECT_EQ(worker_gpu(e, 2), "2");
}

TEST(TaskEnv, OpenMpiGivesRanksButNoNodeList) {
  // mpirun -np 6 over 2 nodes, 3 per node: the second task on its node.
  const Vars v = {{"OMPI_COMM_WORLD_RANK", "4"},       {"OMPI_COMM_WORLD_SIZE", "6"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"},
                  {"PMIX_NAMESPACE", "544145409"},     {"SLURM_PROCID", "0"}};  // inherited from a batch step
  TaskEnv e = read(v);
  EXPECT_EQ(e.scheduler, Scheduler::kOpenMpi);
  EXPECT_EQ(e.proc_id, 4);
  EXPECT_EQ(e.num_tasks, 6);
  EXPECT_TRUE(e.nodes.empty());
  EXPECT_EQ(e.launch_id, "ompi-544145409");
  e.node_name = "n2";
  const TaskPlan t = plan_task(e, Placement{1, 0});
  EXPECT_EQ(t.role, NodeRole::kWorker);
  EXPECT_EQ(t.rank, -1);  // the coordinator assigns it
  EXPECT_EQ(t.num_servers, 2u);
  EXPECT_EQ(t.num_workers, 4u);
  EXPECT_EQ(t.local_role_index, 0u);
  EXPECT_FALSE(t.runs_coordinator);
  e.proc_id = 0;
  e.local_id = 0;
  const TaskPlan first = plan_task(e, Placement{1, 0});
  EXPECT_EQ(first.role, NodeRole::kServer);
  EXPECT_TRUE(first.runs_coordinator);
  // Uneven nodes and server nodes cannot be planned without a node list.
  e.local_size = 4;
  EXPECT_THROW(plan_task(e, Placement{1, 0}), Error);
  e.local_size = 3;
  EXPECT_THROW(plan_task(e, Placement{1, 1}), Error);
}

TEST(TaskEnv, PmiFromHydraAndErrorsNameTheVariable) {
  TaskEnv e = read({{"PMI_RANK", "2"},
                    {"PMI_SIZE", "4"},
                    {"MPI_LOCALRANKID", "0"},
                    {"MPI_LOCALNRANKS", "2"},
                    {"PMI_JOBID", "job.7"}});
  EXPECT_EQ(e.scheduler, Scheduler::kPmi);
  EXPECT_EQ(e.proc_id, 2);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.launch_id, "pmi-job.7");
  try {
    read({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}});
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("MPI_LOCALRANKID is not set"), std::string::npos) << err.what();
  }
  try {
    read({});
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("no scheduler variables"), std::string::npos) << err.what();
  }
  EXPECT_THROW(scheduler_from_name("lsf"), Error);
}

TEST(TaskEnv, PbsNodeFileGivesNodesAndSlots) {
  const std::string path = "/tmp/pshard_pbs_nodefile_" + std::to_string(::getpid());
  std::ofstream(path) << "nodeA\nnodeA\nnodeB\nnodeB\n";
  TaskEnv e = read({{"PBS_NODEFILE", path}, {"PBS_VNODENUM", "3"}, {"PBS_JOBID", "1234.pbsserver"}});
  std::remove(path.c_str());
  EXPECT_EQ(e.scheduler, Scheduler::kPbs);
  EXPECT_EQ(e.job_id, 1234);
  EXPECT_EQ(e.nodes, (std::vector<std::string>{"nodeA", "nodeB"}));
  EXPECT_EQ(e.tasks_per_node, (std::vector<int>{2, 2}));
  EXPECT_EQ(e.node_id, 1);
  EXPECT_EQ(e.local_id, 1);
  EXPECT_EQ(e.node_name, "nodeB");
  const TaskPlan t = plan_task(e, Placement{1, 0});
  EXPECT_EQ(describe(t), "nodeB:worker1");
}

}  // namespace
}  // namespace pshard::scheduler
