// The coordinator when nodes fail: silent, dead, stuck or short workers under each failure policy, launchers' and
// pshard join's notices, a second registration of a live rank, mismatched barriers.
#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/common/control/coordinator_fixture.h"

namespace pshard {
namespace {

using namespace coordinator_testing;

TEST(Coordinator, SilentWorkerUnderPolicyAbortAbortsEveryoneNamingIt) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kAbort;
  Coordinator coord(opt);
  coord.start();
  zmq::context_t ctx;
  std::unique_ptr<RawNode> raw;
  std::vector<std::unique_ptr<ClusterClient>> nodes;
  std::thread t([&] {
    nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                      client_options(coord.endpoint(), NodeRole::kWorker, 0)});
  });
  std::this_thread::sleep_for(milliseconds(100));
  raw = std::make_unique<RawNode>(ctx, coord.endpoint(), NodeRole::kWorker);  // sends no heartbeats
  t.join();
  auto start = Clock::now();
  EventLog logs[2];
  for (int i = 0; i < 2; ++i) logs[i].attach(*nodes[i]);
  for (int i = 0; i < 2; ++i) {
    ClusterEvent e;
    ASSERT_TRUE(logs[i].wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e));
    EXPECT_NE(e.reason.find("worker 1 (host rawhost, pid 4242) is dead"), std::string::npos) << e.reason;
    EXPECT_EQ(e.node.role, NodeRole::kWorker);
    EXPECT_EQ(e.node.rank, 1u);
    EXPECT_TRUE(nodes[i]->stopping());
  }
  // Within heartbeat timeout (400 ms) plus slack.
  EXPECT_LT(Clock::now() - start, milliseconds(400 + 1000));
  EXPECT_THROW(nodes[0]->barrier("after-abort", milliseconds(1000)), Error);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->reason.find("worker 1"), std::string::npos) << r->reason;
}

TEST(Coordinator, SilentWorkerUnderPolicyContinueIsReportedAndTheJobGoesOn) {
  auto opt = coord_options(1, 3);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  zmq::context_t ctx;
  std::unique_ptr<RawNode> raw;
  std::vector<std::unique_ptr<ClusterClient>> nodes;
  std::thread t([&] {
    nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                      client_options(coord.endpoint(), NodeRole::kWorker, 0),
                      client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  });
  std::this_thread::sleep_for(milliseconds(100));
  raw = std::make_unique<RawNode>(ctx, coord.endpoint(), NodeRole::kWorker);
  t.join();
  EventLog logs[3];
  for (int i = 0; i < 3; ++i) logs[i].attach(*nodes[i]);
  for (int i = 0; i < 3; ++i) {
    ClusterEvent e;
    ASSERT_TRUE(logs[i].wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e));
    EXPECT_EQ(e.node.role, NodeRole::kWorker);
    EXPECT_EQ(e.node.rank, 2u);
    EXPECT_EQ(e.node.pid, 4242);
    EXPECT_FALSE(nodes[i]->stopping());
  }
  // The survivors still pass barriers (the dead worker is not waited for).
  std::vector<std::future<void>> f;
  for (auto& n : nodes) {
    ClusterClient* c = n.get();
    f.push_back(std::async(std::launch::async, [c] { c->barrier("after-death", milliseconds(3000)); }));
  }
  for (auto& x : f) EXPECT_NO_THROW(x.get());
  // Workers leave -> the server is told to shut down -> the job ran to its end, but without worker 2.
  nodes[1]->leave(0);
  nodes[2]->leave(0);
  ClusterEvent e;
  ASSERT_TRUE(logs[0].wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("2 of 3 workers left successfully"), std::string::npos) << e.reason;
  nodes[0]->leave(0);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, Coordinator::kExitWorkersLost) << r->reason;
}

// Under policy continue a worker that leaves with a failure status (a program that left before the end of the job)
// is a dead worker: the others go on, and the job ends as one that lost a worker, not as a success.
TEST(Coordinator, AWorkerLeavingWithAFailureUnderPolicyContinueIsALostWorker) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  nodes[2]->leave(1, "it left before the end of the job, after step 5 of 40");
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e));
  EXPECT_EQ(e.node.rank, 1u);
  nodes[1]->leave(0);
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  nodes[0]->leave(0);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, Coordinator::kExitWorkersLost) << r->reason;
}

// The job's workers push the same steps: a worker that leaves cleanly with fewer pushes than another is the job's
// failure under either policy, whichever of the two left first, and the servers are told at once that it left (so
// that the steps of the worker that goes on do not wait for it); the worker that went on is not named.
TEST(Coordinator, AWorkerThatLeftWithFewerPushesThanAnotherIsTheFailure) {
  for (bool short_leaves_first : {true, false}) {
    for (auto policy : {Coordinator::FailurePolicy::kContinue, Coordinator::FailurePolicy::kAbort}) {
      auto opt = coord_options(1, 2);
      opt.failure_policy = policy;
      Coordinator coord(opt);
      coord.start();
      auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                             client_options(coord.endpoint(), NodeRole::kWorker, 0),
                             client_options(coord.endpoint(), NodeRole::kWorker, 1)});
      EventLog log;
      log.attach(*nodes[0]);
      ClusterEvent e;
      if (short_leaves_first) {
        nodes[2]->leave(0, "", 11);
        ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kWorkerLeft, milliseconds(3000), &e));
        EXPECT_EQ(e.node.rank, 1u);
        nodes[1]->leave(0, "", 12);
      } else {
        nodes[1]->leave(0, "", 12);
        ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kWorkerLeft, milliseconds(3000), &e));
        EXPECT_EQ(e.node.rank, 0u);
        nodes[2]->leave(0, "", 11);
      }
      const bool abort = policy == Coordinator::FailurePolicy::kAbort;
      ASSERT_TRUE(log.wait_for_kind(abort ? ClusterEvent::Kind::kAbort : ClusterEvent::Kind::kShutdown,
                                    milliseconds(3000), &e));
      nodes[0]->leave(abort ? 1 : 0);
      auto r = coord.wait_for(milliseconds(3000));
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->exit_code, abort ? 1 : Coordinator::kExitWorkersLost) << r->reason;
      if (abort) {
        EXPECT_NE(r->reason.find("worker 1 (host"), std::string::npos) << r->reason;
        EXPECT_NE(r->reason.find("it left after 11 pushed steps, while worker 0 (host"), std::string::npos)
            << r->reason;
        EXPECT_EQ(r->reason.rfind("worker 1 (host", 0), 0u) << r->reason;  // named first: the failure
      }
    }
  }
}

// Workers that all leave after the same pushes finished the job, whoever left first.
TEST(Coordinator, WorkersLeavingAfterTheSamePushesFinishTheJob) {
  auto opt = coord_options(1, 2);
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  nodes[2]->leave(0, "", 12);
  nodes[1]->leave(0, "", 12);
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  nodes[0]->leave(0);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

// A worker that said it pushed the job's last step and then died (before its model save or its leave) is counted as
// finished, under either policy: the job ends with status 0.
TEST(Coordinator, AWorkerThatDiesAfterItsLastStepIsCountedAsFinished) {
  for (auto policy : {Coordinator::FailurePolicy::kContinue, Coordinator::FailurePolicy::kAbort}) {
    auto opt = coord_options(1, 2);
    opt.failure_policy = policy;
    Coordinator coord(opt);
    coord.start();
    auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                           client_options(coord.endpoint(), NodeRole::kWorker, 0),
                           client_options(coord.endpoint(), NodeRole::kWorker, 1)});
    nodes[2]->tell(ClusterClient::JobFact::kTrained);
    nodes[2]->leave(1, "killed while it saved the model");
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_FALSE(nodes[0]->stopping()) << "the job ended when worker 1 died after its last step";
    nodes[1]->tell(ClusterClient::JobFact::kTrained);
    nodes[1]->leave(0);
    for (auto deadline = Clock::now() + milliseconds(5000); !nodes[0]->stopping() && Clock::now() < deadline;) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    nodes[0]->leave(0);
    auto r = coord.wait_for(milliseconds(5000));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->exit_code, 0) << r->reason;
  }
}

// pshard launch's notice that a process ended: with the job's token and the node's pid it kills the node at once
// (its heartbeats still come: this test's nodes share one process); another token, or another pid (a restarted process
// of that rank), changes nothing.
TEST(Coordinator, ALaunchersNoticeThatAProcessEndedDeclaresItsNodeDead) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  ProcessNotifier stranger(coord.endpoint(), "token-B", transport::CurveKeys{});
  stranger.process_ended(NodeRole::kWorker, 1, ::getpid(), "was killed by signal 9 (SIGKILL)");
  ProcessNotifier launcher(coord.endpoint(), "token-A", transport::CurveKeys{});
  launcher.process_ended(NodeRole::kWorker, 1, ::getpid() + 1, "was killed by signal 9 (SIGKILL)");
  ClusterEvent e;
  EXPECT_FALSE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(500), &e)) << e.reason;
  launcher.process_ended(NodeRole::kWorker, 1, ::getpid(), "was killed by signal 9 (SIGKILL)");
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e));
  EXPECT_EQ(e.node.rank, 1u);
  EXPECT_NE(e.reason.find("worker 1 (host "), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find(" is dead: its process was killed by signal 9 (SIGKILL) (pshard launch saw it end)"),
            std::string::npos)
      << e.reason;
  nodes[1]->leave(0);
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  nodes[0]->leave(0);
  nodes[2].reset();
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, Coordinator::kExitWorkersLost) << r->reason;
}

// pshard join's notice names its worker by pid on its host, not by rank (the coordinator chose the rank): another pid
// changes nothing; the worker's pid kills that worker at once, and the reason says pshard join saw it end.
TEST(Coordinator, AJoinersNoticeNamesItsWorkerByPid) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  ProcessNotifier joiner(coord.endpoint(), "token-A", transport::CurveKeys{});
  joiner.process_ended(NodeRole::kWorker, std::nullopt, ::getpid() + 1, "was killed by signal 9 (SIGKILL)");
  joiner.process_ended(NodeRole::kServer, std::nullopt, ::getpid() + 1, "was killed by signal 9 (SIGKILL)");
  ClusterEvent e;
  EXPECT_FALSE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(500), &e)) << e.reason;
  joiner.process_ended(NodeRole::kWorker, std::nullopt, ::getpid(), "was killed by signal 9 (SIGKILL)");
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e));
  EXPECT_EQ(e.node.role, NodeRole::kWorker);
  EXPECT_NE(e.reason.find(" is dead: its process was killed by signal 9 (SIGKILL) (pshard join saw it end)"),
            std::string::npos)
      << e.reason;
  const uint32_t alive = e.node.rank == 0 ? 2 : 1;  // nodes[1] is worker 0, nodes[2] worker 1
  nodes[alive]->leave(0);
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  nodes[0]->leave(0);
  nodes[3 - alive].reset();
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, Coordinator::kExitWorkersLost) << r->reason;
}

// Under policy continue, a second process with a live worker's rank (a child that inherited the job's environment and
// called ps.init()) is refused with a reason naming the rank, and the live worker keeps it; a restarted worker
// (pshard worker --join) does take the rank over.
TEST(Coordinator, ASecondRegistrationOfALiveWorkersRankIsRefusedUnlessItIsARestart) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  try {
    ClusterClient child(client_options(coord.endpoint(), NodeRole::kWorker, 0));
    ADD_FAILURE() << "a second process took over the live worker 0";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker rank 0 is alive (worker 0"), std::string::npos) << what;
    EXPECT_NE(what.find("a second process cannot join the job with its rank"), std::string::npos) << what;
  }
  ClusterEvent e;
  EXPECT_FALSE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(300), &e)) << e.reason;
  EXPECT_EQ(nodes[1]->rank(), 0u);
  EXPECT_FALSE(nodes[1]->stopping());

  ClusterClient::Options restarted = client_options(coord.endpoint(), NodeRole::kWorker, 0);
  restarted.replaces_live = true;
  ClusterClient again(restarted);
  EXPECT_EQ(again.rank(), 0u);
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e));
  EXPECT_EQ(e.node.rank, 0u);
  EXPECT_NE(e.reason.find("replaced by a new process"), std::string::npos) << e.reason;
  // The server hears of the new process (its shared-memory channel admits that pid for the rank from now on).
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kWorkerRegistered, milliseconds(3000), &e));
  EXPECT_EQ(e.node.role, NodeRole::kWorker);
  EXPECT_EQ(e.node.rank, 0u);
  EXPECT_EQ(e.node.pid, ::getpid());
  nodes[1].reset();
  again.leave(0);
  nodes[2]->leave(0);
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  nodes[0]->leave(0);
  ASSERT_TRUE(coord.wait_for(milliseconds(3000)).has_value());
}

// Workers that name their barriers differently would each wait until its own timeout, told nothing: once every live
// worker waits and no barrier can be released, the coordinator ends the job naming the barriers and who waits where.
TEST(Coordinator, BarriersNamedDifferentlyByTheRanksAbortTheJobNamingThem) {
  Coordinator coord(coord_options(1, 3));
  coord.start();
  auto nodes = join_all(
      {client_options(coord.endpoint(), NodeRole::kServer, 0), client_options(coord.endpoint(), NodeRole::kWorker, 0),
       client_options(coord.endpoint(), NodeRole::kWorker, 1), client_options(coord.endpoint(), NodeRole::kWorker, 2)});
  const auto start = Clock::now();
  std::vector<std::future<std::string>> waits;
  const char* names[] = {"epoch 1", "epoch 2", "epoch 1"};
  for (int w = 0; w < 3; ++w) {
    ClusterClient* c = nodes[1 + w].get();
    const std::string name = names[w];
    waits.push_back(std::async(std::launch::async, [c, name]() -> std::string {
      try {
        c->barrier(name, milliseconds(20000));
        return "released";
      } catch (const Error& e) {
        return e.what();
      }
    }));
  }
  const std::string want =
      "the workers wait in different barriers, so none can be released (every live one waits, each barrier needs all "
      "of them): 'epoch 1' (worker 0, worker 2), 'epoch 2' (worker 1)";
  for (auto& f : waits) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_NE(f.get().find(want), std::string::npos);
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));  // not the barriers' own 20 s timeout
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_NE(r->reason.find(want), std::string::npos) << r->reason;
}

// What a server says of a worker that holds a step up while its heartbeats go on (server/kv/stall_watch.h).
const char* const kStuckAccount =
    "fc1.weight[slice 0]: the read for step 3 waited 6.4 s for the push of worker 1, which did not come";

// A worker alive (heartbeating) but reported stuck by a server, under policy continue: it is the one removed (the
// others hear it is dead, it is told to exit), the worker that waited for it is not, and the job ends normally.
TEST(Coordinator, AWorkerAServerReportsStuckIsRemovedUnderPolicyContinue) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kContinue;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog logs[3];
  for (int i = 0; i < 3; ++i) logs[i].attach(*nodes[i]);
  // Longer than the heartbeat timeout (400 ms): only the server's report can find worker 1.
  std::this_thread::sleep_for(milliseconds(600));
  nodes[0]->report_stuck({1}, kStuckAccount);
  for (int i = 0; i < 2; ++i) {
    ClusterEvent e;
    ASSERT_TRUE(logs[i].wait_for_kind(ClusterEvent::Kind::kNodeDead, milliseconds(3000), &e)) << "node " << i;
    EXPECT_EQ(e.node.role, NodeRole::kWorker);
    EXPECT_EQ(e.node.rank, 1u);
    EXPECT_EQ(e.reason.rfind("worker 1 (host ", 0), 0u) << e.reason;
    EXPECT_NE(e.reason.find(") is dead: stuck: server 0 (host "), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find(std::string("reports: ") + kStuckAccount), std::string::npos) << e.reason;
    EXPECT_FALSE(nodes[i]->stopping());
  }
  ClusterEvent told;
  ASSERT_TRUE(logs[2].wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &told));
  EXPECT_EQ(told.node.rank, 1u);
  EXPECT_NE(told.reason.find("worker 1 (host "), std::string::npos) << told.reason;
  EXPECT_NE(told.reason.find(") is stuck: server 0 (host "), std::string::npos) << told.reason;
  EXPECT_NE(told.reason.find("the job goes on without it"), std::string::npos) << told.reason;
  // Nobody heard of worker 0's death: it leaves normally, and the job ends with it.
  std::this_thread::sleep_for(milliseconds(200));
  {
    std::lock_guard<std::mutex> lock(logs[0].mu);
    for (const ClusterEvent& e : logs[0].events) {
      EXPECT_FALSE(e.kind == ClusterEvent::Kind::kNodeDead && e.node.rank == 0) << e.reason;
    }
  }
  nodes[1]->leave(0);
  ClusterEvent e;
  ASSERT_TRUE(logs[0].wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("1 of 2 workers left successfully"), std::string::npos) << e.reason;
  nodes[0]->leave(0);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  // The job ran to its end without worker 1: the coordinator says so (launch then exits 1, naming it).
  EXPECT_EQ(r->exit_code, Coordinator::kExitWorkersLost) << r->reason;
}

// Under policy abort, the job ends naming the stuck worker (not the one that waited for it) and quoting the server.
TEST(Coordinator, AWorkerAServerReportsStuckEndsTheJobNamingItUnderPolicyAbort) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kAbort;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog logs[3];
  for (int i = 0; i < 3; ++i) logs[i].attach(*nodes[i]);
  nodes[0]->report_stuck({1}, kStuckAccount);
  for (int i = 0; i < 3; ++i) {  // the stuck worker too: it is alive and would go on otherwise
    ClusterEvent e;
    ASSERT_TRUE(logs[i].wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e)) << "node " << i;
    EXPECT_EQ(e.node.role, NodeRole::kWorker);
    EXPECT_EQ(e.node.rank, 1u);
    EXPECT_EQ(e.reason.rfind("worker 1 (host ", 0), 0u) << e.reason;
    EXPECT_NE(e.reason.find(std::string(") is stuck: server 0 (host ")), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find(std::string("reports: ") + kStuckAccount + " (cluster.failure_policy = abort)"),
              std::string::npos)
        << e.reason;
  }
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->reason.rfind("worker 1 (host ", 0), 0u) << r->reason;
  EXPECT_EQ(r->reason.find("worker 0"), std::string::npos) << r->reason;
}

// Only servers judge: a worker's report of another is ignored, and the job goes on.
TEST(Coordinator, AStuckReportFromAWorkerIsIgnored) {
  auto opt = coord_options(1, 2);
  opt.failure_policy = Coordinator::FailurePolicy::kAbort;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[2]);
  nodes[1]->report_stuck({1}, kStuckAccount);
  ClusterEvent e;
  EXPECT_FALSE(log.wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(600), &e)) << e.reason;
  end_job(nodes, 1);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

}  // namespace
}  // namespace pshard
