// SLURM's compressed lists in C++: host lists ("node[1-3,5],gpu07") and task counts per node ("2(x3),1").
#pragma once

#include <string>
#include <vector>

namespace pshard::scheduler {

// Expands a SLURM host list the way `scontrol show hostnames` does: entries
// are separated by commas (or whitespace) outside brackets; a bracket holds
// numbers and ranges, and a range keeps the zero padding of its lower bound;
// several bracket groups in one entry multiply out. Duplicates are kept, order
// is preserved. Throws pshard::Error naming the list and the offset of the
// problem (unbalanced bracket, bad range, more than 1,000,000 hosts, ...).
//
//   expand_hostlist("node[1-3,5],gpu07")   // {"node1", "node2", "node3", "node5", "gpu07"}
//   expand_hostlist("n[08-10]")            // {"n08", "n09", "n10"}
//   expand_hostlist("r[1-2]n[1-2]")        // {"r1n1", "r1n2", "r2n1", "r2n2"}
std::vector<std::string> expand_hostlist(const std::string& list);

// Expands SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE, "COUNT(xREPEAT)"
// items separated by commas, into one count per node.
//
//   expand_tasks_per_node("2(x3),1")   // {2, 2, 2, 1}
std::vector<int> expand_tasks_per_node(const std::string& list);

}  // namespace pshard::scheduler
