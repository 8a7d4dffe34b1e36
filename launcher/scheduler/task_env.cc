// Reading a task's place in a launch from SLURM, Open MPI, PMI/PMIx (MPICH Hydra and others) or PBS
// variables (see task_env.h and docs/SLURM.md).
#include "launcher/scheduler/task_env.h"

#include <cctype>
#include <fstream>
#include <initializer_list>
#include <map>

#include "common/error.h"
#include "launcher/scheduler/hostlist.h"

namespace pshard::scheduler {
namespace {

const char* const kHowToRun =
    "run `pshard task` as every task of a parallel launch: srun, mpirun/mpiexec, or pbsdsh in a PBS job "
    "(docs/SLURM.md)";

std::string first_set(const Getenv& getenv, std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (v != nullptr && *v != '\0') {
      *which = n;
      return v;
    }
  }
  *which = nullptr;
  return "";
}

bool is_set(const Getenv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

int64_t required_int(const Getenv& getenv, std::initializer_list<const char*> names) {
  const char* which = nullptr;
  const std::string v = first_set(getenv, names, &which);
  if (which == nullptr) {
    throw Error(std::string("environment variable ") + *names.begin() + " is not set: " + kHowToRun);
  }
  return parse_env_count(which, v);
}

// The decimal digits of an id such as "1234.pbsserver" or "544145409" (0 when there are none): a
// number for the coordinator port.
int64_t digits_of(const std::string& id) {
  int64_t v = 0;
  for (char c : id) {
    if (c >= '0' && c <= '9') v = (v * 10 + (c - '0')) % 1000000007;
  }
  return v;
}

// A launch id safe in a file name.
std::string file_safe(const std::string& id) {
  std::string out;
  for (char c : id) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out.empty() ? "0" : out;
}

TaskEnv read_slurm(const Getenv& getenv) {
  TaskEnv e;
  e.scheduler = Scheduler::kSlurm;
  e.job_id = required_int(getenv, {"SLURM_JOB_ID", "SLURM_JOBID"});
  const char* which = nullptr;
  const std::string step = first_set(getenv, {"SLURM_STEP_ID", "SLURM_STEPID"}, &which);
  e.step_id = which ? parse_env_count(which, step) : 0;
  const std::string restart = first_set(getenv, {"SLURM_RESTART_COUNT"}, &which);
  e.restart_count = which ? parse_env_count(which, restart) : 0;
  e.launch_id =
      "slurm-" + std::to_string(e.job_id) + "." + std::to_string(e.step_id) + "." + std::to_string(e.restart_count);
  e.proc_id = required_int(getenv, {"SLURM_PROCID"});
  e.num_tasks = required_int(getenv, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  e.node_id = required_int(getenv, {"SLURM_NODEID"});
  e.local_id = required_int(getenv, {"SLURM_LOCALID"});

  const std::string nodelist =
      first_set(getenv, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &which);
  if (which == nullptr) throw Error(std::string("environment variable SLURM_JOB_NODELIST is not set: ") + kHowToRun);
  try {
    e.nodes = expand_hostlist(nodelist);
  } catch (const Error& err) {
    throw Error(std::string(which) + ": " + err.what());
  }
  const std::string tpn = first_set(getenv, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &which);
  if (which != nullptr) {
    try {
      e.tasks_per_node = expand_tasks_per_node(tpn);
    } catch (const Error& err) {
      throw Error(std::string(which) + ": " + err.what());
    }
  } else if (e.num_tasks % static_cast<int64_t>(e.nodes.size()) == 0) {
    e.tasks_per_node.assign(e.nodes.size(), static_cast<int>(e.num_tasks / static_cast<int64_t>(e.nodes.size())));
  } else {
    throw Error("SLURM_TASKS_PER_NODE is not set and " + std::to_string(e.num_tasks) +
                " tasks do not divide evenly over " + std::to_string(e.nodes.size()) + " nodes");
  }
  if (e.node_id >= 0 && e.node_id < static_cast<int64_t>(e.tasks_per_node.size())) {
    e.local_size = e.tasks_per_node[static_cast<size_t>(e.node_id)];
  }
  const char* name = getenv("SLURMD_NODENAME");
  if (name != nullptr && *name != '\0') {
    e.node_name = name;
  } else if (e.node_id >= 0 && e.node_id < static_cast<int64_t>(e.nodes.size())) {
    e.node_name = e.nodes[static_cast<size_t>(e.node_id)];
  }
  const std::string gpus = first_set(getenv, {"SLURM_GPUS_ON_NODE"}, &which);
  e.gpus_on_node = which ? parse_env_count(which, gpus) : 0;
  return e;
}

// Open MPI's mpirun: rank, size and the rank on the node; no node list.
TaskEnv read_open_mpi(const Getenv& getenv) {
  TaskEnv e;
  e.scheduler = Scheduler::kOpenMpi;
  e.proc_id = required_int(getenv, {"OMPI_COMM_WORLD_RANK"});
  e.num_tasks = required_int(getenv, {"OMPI_COMM_WORLD_SIZE"});
  e.local_id = required_int(getenv, {"OMPI_COMM_WORLD_LOCAL_RANK"});
  e.local_size = required_int(getenv, {"OMPI_COMM_WORLD_LOCAL_SIZE"});
  const char* which = nullptr;
  const std::string id = first_set(getenv, {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}, &which);
  e.launch_id = "ompi-" + file_safe(id);
  e.job_id = digits_of(id);
  return e;
}

// PMI (MPICH's Hydra mpiexec, Intel MPI, Cray PALS) or PMIx: rank and size from PMI_RANK/PMI_SIZE
// (PMIX_RANK where only that is set), the rank on the node from the launcher's own variable.
TaskEnv read_pmi(const Getenv& getenv) {
  TaskEnv e;
  e.scheduler = Scheduler::kPmi;
  e.proc_id = required_int(getenv, {"PMI_RANK", "PMIX_RANK"});
  e.num_tasks = required_int(getenv, {"PMI_SIZE"});
  e.local_id = required_int(getenv, {"MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PALS_LOCAL_RANKID"});
  e.local_size = required_int(getenv, {"MPI_LOCALNRANKS", "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"});
  const char* which = nullptr;
  const std::string id = first_set(getenv, {"PMIX_NAMESPACE", "PMI_JOBID", "PMI_KVSNAME", "PALS_APID"}, &which);
  e.launch_id = "pmi-" + file_safe(id);
  e.job_id = digits_of(id);
  return e;
}

// PBS (PBS Pro, OpenPBS, Torque): $PBS_NODEFILE lists each node once per task slot, in order; the
// task's index into it is PBS_VNODENUM (pbsdsh sets it; the template sets it for ssh as well).
TaskEnv read_pbs(const Getenv& getenv) {
  TaskEnv e;
  e.scheduler = Scheduler::kPbs;
  const char* which = nullptr;
  const std::string nodefile = first_set(getenv, {"PBS_NODEFILE"}, &which);
  if (which == nullptr) throw Error(std::string("environment variable PBS_NODEFILE is not set: ") + kHowToRun);
  e.proc_id = required_int(getenv, {"PBS_VNODENUM"});
  const std::string job = first_set(getenv, {"PBS_JOBID"}, &which);
  if (which == nullptr) throw Error(std::string("environment variable PBS_JOBID is not set: ") + kHowToRun);
  e.job_id = digits_of(job.substr(0, job.find('.')));
  e.launch_id = "pbs-" + file_safe(job);
  std::ifstream in(nodefile);
  if (!in) throw Error("PBS_NODEFILE " + nodefile + ": cannot open");
  std::vector<std::string> slots;
  for (std::string line; std::getline(in, line);) {
    const size_t b = line.find_first_not_of(" \t\r"), end = line.find_last_not_of(" \t\r");
    if (b != std::string::npos) slots.push_back(line.substr(b, end - b + 1));
  }
  if (slots.empty()) throw Error("PBS_NODEFILE " + nodefile + " lists no node");
  e.num_tasks = static_cast<int64_t>(slots.size());
  if (e.proc_id >= e.num_tasks) {
    throw Error("PBS_VNODENUM " + std::to_string(e.proc_id) + " is outside the " + std::to_string(e.num_tasks) +
                " slots of PBS_NODEFILE " + nodefile);
  }
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < slots.size(); ++i) {
    auto [it, fresh] = index.emplace(slots[i], e.nodes.size());
    if (fresh) {
      e.nodes.push_back(slots[i]);
      e.tasks_per_node.push_back(0);
    }
    if (static_cast<int64_t>(i) == e.proc_id) {
      e.node_id = static_cast<int64_t>(it->second);
      e.local_id = e.tasks_per_node[it->second];
    }
    ++e.tasks_per_node[it->second];
  }
  e.node_name = e.nodes[static_cast<size_t>(e.node_id)];
  e.local_size = e.tasks_per_node[static_cast<size_t>(e.node_id)];
  return e;
}

}  // namespace

const char* scheduler_name(Scheduler s) {
  switch (s) {
    case Scheduler::kAuto: return "auto";
    case Scheduler::kSlurm: return "slurm";
    case Scheduler::kOpenMpi: return "openmpi";
    case Scheduler::kPmi: return "pmi";
    case Scheduler::kPbs: return "pbs";
  }
  return "?";
}

Scheduler scheduler_from_name(const std::string& name) {
  for (Scheduler s : {Scheduler::kAuto, Scheduler::kSlurm, Scheduler::kOpenMpi, Scheduler::kPmi, Scheduler::kPbs}) {
    if (name == scheduler_name(s)) return s;
  }
  throw Error("unknown scheduler '" + name + "' (expected auto, slurm, openmpi, pmi or pbs)");
}

TaskEnv TaskEnv::read(const Getenv& getenv, Scheduler which) {
  if (which == Scheduler::kAuto) {
    // Variables an MPI launcher sets for each process win over SLURM's: under mpirun inside an sbatch
    // script every process inherits the batch step's SLURM_PROCID (0). Under srun, PMI/PMIx variables
    // (--mpi=pmi2/pmix) come with SLURM's own, which also give the node list: SLURM wins there.
    if (is_set(getenv, "OMPI_COMM_WORLD_RANK")) {
      which = Scheduler::kOpenMpi;
    } else if (is_set(getenv, "SLURM_PROCID") && is_set(getenv, "SLURM_STEP_ID")) {
      which = Scheduler::kSlurm;
    } else if (is_set(getenv, "PMI_RANK") || is_set(getenv, "PMIX_RANK")) {
      which = Scheduler::kPmi;
    } else if (is_set(getenv, "SLURM_PROCID")) {
      which = Scheduler::kSlurm;
    } else if (is_set(getenv, "PBS_NODEFILE")) {
      which = Scheduler::kPbs;
    } else {
      throw Error(
          std::string("no scheduler variables: none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, "
                      "PBS_NODEFILE is set: ") +
          kHowToRun);
    }
  }
  TaskEnv e;
  switch (which) {
    case Scheduler::kSlurm: e = read_slurm(getenv); break;
    case Scheduler::kOpenMpi: e = read_open_mpi(getenv); break;
    case Scheduler::kPmi: e = read_pmi(getenv); break;
    case Scheduler::kPbs: e = read_pbs(getenv); break;
    case Scheduler::kAuto: break;
  }
  const char* cvd = getenv("CUDA_VISIBLE_DEVICES");
  e.cuda_visible_devices = cvd ? cvd : "";
  return e;
}

}  // namespace pshard::scheduler
