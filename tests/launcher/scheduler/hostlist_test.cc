// SLURM host-list / tasks-per-node expansion; expected values are what `scontrol show hostnames` (22.05) prints.
#include "launcher/scheduler/hostlist.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace pshard::scheduler {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, SingleHostsAndCommas) {
  EXPECT_EQ(expand_hostlist("node1"), Hosts({"node1"}));
  EXPECT_EQ(expand_hostlist("a,b,c"), Hosts({"a", "b", "c"}));
  EXPECT_EQ(expand_hostlist("gpu07"), Hosts({"gpu07"}));
}

TEST(Hostlist, RangesAndListsInBrackets) {
  EXPECT_EQ(expand_hostlist("node[1-3,5],gpu07"), Hosts({"node1", "node2", "node3", "node5", "gpu07"}));
  EXPECT_EQ(expand_hostlist("node[1-2]"), Hosts({"node1", "node2"}));
  EXPECT_EQ(expand_hostlist("n[7]"), Hosts({"n7"}));
  EXPECT_EQ(expand_hostlist("n[9-11]"), Hosts({"n9", "n10", "n11"}));
}

TEST(Hostlist, ZeroPaddingFollowsTheLowerBound) {
  EXPECT_EQ(expand_hostlist("n[08-11]"), Hosts({"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("c[001-003,010]"), Hosts({"c001", "c002", "c003", "c010"}));
  EXPECT_EQ(expand_hostlist("c[098-101]"), Hosts({"c098", "c099", "c100", "c101"}));
}

TEST(Hostlist, SuffixAndSeveralBracketGroupsMultiplyOut) {
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]"), Hosts({"r1n1", "r1n2", "r2n1", "r2n2"}));
  // scontrol (22.05) rejects a suffix after the last bracket ("Invalid hostlist"); we accept it.
  EXPECT_EQ(expand_hostlist("node[1-2]-ib"), Hosts({"node1-ib", "node2-ib"}));
  EXPECT_EQ(expand_hostlist("rack[1,3]-node[01-02],login"),
            Hosts({"rack1-node01", "rack1-node02", "rack3-node01", "rack3-node02", "login"}));
}

TEST(Hostlist, MixedListsKeepOrder) {
  EXPECT_EQ(expand_hostlist("b[2-3],a1,b1"), Hosts({"b2", "b3", "a1", "b1"}));
  EXPECT_EQ(expand_hostlist("x[1-2] y[1]"), Hosts({"x1", "x2", "y1"}));
}

TEST(Hostlist, LargeRange) {
  const Hosts h = expand_hostlist("cn[0001-1000]");
  ASSERT_EQ(h.size(), 1000u);
  EXPECT_EQ(h.front(), "cn0001");
  EXPECT_EQ(h[99], "cn0100");
  EXPECT_EQ(h.back(), "cn1000");
}

void expect_error(const std::string& list, const std::string& part) {
  try {
    expand_hostlist(list);
    ADD_FAILURE() << "no error for '" << list << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << list << ": " << e.what();
  }
}

TEST(Hostlist, BadListsAreErrorsWithTheOffset) {
  expect_error("", "names no hosts");
  expect_error("node[1-3", "'[' without ']' at offset 4");
  expect_error("node1-3]", "']' without '['");
  expect_error("node[3-1]", "range 3-1 goes backwards");
  expect_error("node[a-b]", "is not a number");
  expect_error("node[1,,2]", "empty item in brackets");
  expect_error("node[]", "empty item in brackets");
  expect_error("n[[1]]", "nested '['");
  expect_error("n[0-99999999]", "too large");
  expect_error("a[1-1000]b[1-1000]c[1-10]", "more than 1000000 hosts");
}

TEST(TasksPerNode, Expands) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), std::vector<int>({2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4"), std::vector<int>({4}));
  EXPECT_EQ(expand_tasks_per_node("1,3(x2)"), std::vector<int>({1, 3, 3}));
}

TEST(TasksPerNode, BadValuesAreErrors) {
  EXPECT_THROW(expand_tasks_per_node(""), Error);
  EXPECT_THROW(expand_tasks_per_node("2(3)"), Error);
  EXPECT_THROW(expand_tasks_per_node("2(x)"), Error);
  EXPECT_THROW(expand_tasks_per_node("0"), Error);
  EXPECT_THROW(expand_tasks_per_node("2,,1"), Error);
  EXPECT_THROW(expand_tasks_per_node("x2"), Error);
}

}  // namespace
}  // namespace pshard::scheduler
