// In-process coordinator tests: rendezvous, ranks, token and layout checks, barriers, shutdown, the job's metrics,
// elastic epochs, cluster.json, and a node's view of a coordinator that stops or goes silent (the failures of nodes:
// coordinator_failures_test.cc).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/common/control/coordinator_fixture.h"
#include "tests/support/metrics_events.h"

namespace pshard {
namespace {

using namespace coordinator_testing;

TEST(Coordinator, RendezvousGivesEveryNodeTheSameMapAndDistinctRanks) {
  Coordinator coord(coord_options(2, 3));
  coord.start();
  std::vector<ClusterClient::Options> opts;
  for (int s = 0; s < 2; ++s) {
    auto o = client_options(coord.endpoint(), NodeRole::kServer);
    o.endpoint = "tcp://127.0.0.1:" + std::to_string(45000 + s);
    opts.push_back(o);
  }
  for (int w = 0; w < 3; ++w) opts.push_back(client_options(coord.endpoint(), NodeRole::kWorker));
  auto nodes = join_all(opts);

  const ClusterMap& ref = nodes[0]->map();
  ASSERT_EQ(ref.num_servers, 2u);
  ASSERT_EQ(ref.num_workers, 3u);
  ASSERT_EQ(ref.servers.size(), 2u);
  ASSERT_EQ(ref.workers.size(), 3u);
  std::set<uint32_t> server_ranks, worker_ranks;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ClusterMap& m = nodes[i]->map();
    for (size_t s = 0; s < 2; ++s) EXPECT_TRUE(same_node(m.servers[s], ref.servers[s]));
    for (size_t w = 0; w < 3; ++w) EXPECT_TRUE(same_node(m.workers[w], ref.workers[w]));
    (i < 2 ? server_ranks : worker_ranks).insert(nodes[i]->rank());
    // The map lists this node under its own rank with its own endpoint.
    const NodeInfo& me = i < 2 ? m.servers[nodes[i]->rank()] : m.workers[nodes[i]->rank()];
    EXPECT_EQ(me.endpoint, opts[i].endpoint);
    EXPECT_EQ(me.pid, static_cast<int64_t>(::getpid()));
  }
  EXPECT_EQ(server_ranks, (std::set<uint32_t>{0, 1}));
  EXPECT_EQ(worker_ranks, (std::set<uint32_t>{0, 1, 2}));
  for (uint32_t r = 0; r < 3; ++r) EXPECT_EQ(ref.workers[r].rank, r);
  EXPECT_EQ(coord.map().workers.size(), 3u);
  end_job(nodes, 2);
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

TEST(Coordinator, RequestedRanksAreHonored) {
  Coordinator coord(coord_options(1, 3));
  coord.start();
  auto nodes = join_all(
      {client_options(coord.endpoint(), NodeRole::kWorker, 2), client_options(coord.endpoint(), NodeRole::kWorker, -1),
       client_options(coord.endpoint(), NodeRole::kWorker, 0), client_options(coord.endpoint(), NodeRole::kServer, 0)});
  EXPECT_EQ(nodes[0]->rank(), 2u);
  EXPECT_EQ(nodes[1]->rank(), 1u);
  EXPECT_EQ(nodes[2]->rank(), 0u);
  EXPECT_EQ(nodes[3]->rank(), 0u);
}

TEST(Coordinator, WrongTokenIsRefusedWithAClearMessage) {
  Coordinator coord(coord_options(1, 1));
  coord.start();
  auto o = client_options(coord.endpoint(), NodeRole::kWorker);
  o.job_token = "token-of-another-job";
  try {
    ClusterClient c(o);
    FAIL() << "registration with a wrong token was accepted";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("refused"), std::string::npos) << what;
    // Refused in the ZeroMQ handshake (PLAIN with the token as password), before any message is read.
    EXPECT_NE(what.find("job token"), std::string::npos) << what;
    EXPECT_NE(what.find("PSHARD_JOB_TOKEN"), std::string::npos) << what;
  }
  // The job itself is unaffected: the right nodes still rendezvous.
  auto nodes = join_all(
      {client_options(coord.endpoint(), NodeRole::kServer), client_options(coord.endpoint(), NodeRole::kWorker)});
  EXPECT_EQ(nodes[1]->map().num_workers, 1u);
}

TEST(Coordinator, RankOutOfRangeIsRefused) {
  Coordinator coord(coord_options(1, 2));
  coord.start();
  try {
    ClusterClient c(client_options(coord.endpoint(), NodeRole::kWorker, 5));
    FAIL() << "rank 5 of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5 is out of range"), std::string::npos) << e.what();
  }
}

TEST(Coordinator, LayoutFingerprintMismatchIsAStartupErrorForEveryone) {
  Coordinator coord(coord_options(1, 1));
  coord.start();
  auto a = client_options(coord.endpoint(), NodeRole::kServer);
  a.layout_fingerprint = 0x1111;
  auto b = client_options(coord.endpoint(), NodeRole::kWorker);
  b.layout_fingerprint = 0x2222;
  auto first = std::async(std::launch::async, [a] {
    try {
      ClusterClient c(a);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  std::this_thread::sleep_for(milliseconds(200));  // let the server register first
  std::string second;
  try {
    ClusterClient c(b);
  } catch (const Error& e) {
    second = e.what();
  }
  ASSERT_EQ(first.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::string first_error = first.get();
  EXPECT_NE(second.find("layout fingerprint mismatch"), std::string::npos) << second;
  EXPECT_NE(first_error.find("layout fingerprint mismatch"), std::string::npos) << first_error;
  EXPECT_NE(first_error.find("0x0000000000001111"), std::string::npos) << first_error;
  auto r = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
}

TEST(Coordinator, RendezvousTimeoutNamesWhoIsMissing) {
  auto opt = coord_options(1, 3);
  opt.rendezvous_timeout = milliseconds(600);
  Coordinator coord(opt);
  coord.start();
  auto s = client_options(coord.endpoint(), NodeRole::kServer);
  auto w = client_options(coord.endpoint(), NodeRole::kWorker, 1);
  s.rendezvous_timeout = w.rendezvous_timeout = milliseconds(5000);
  std::vector<std::string> errors(2);
  std::thread t([&] {
    try {
      ClusterClient c(w);
    } catch (const Error& e) {
      errors[1] = e.what();
    }
  });
  try {
    ClusterClient c(s);
  } catch (const Error& e) {
    errors[0] = e.what();
  }
  t.join();
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("rendezvous timed out"), std::string::npos) << e;
    EXPECT_NE(e.find("1 of 3 workers registered (missing worker ranks 0, 2)"), std::string::npos) << e;
  }
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
}

TEST(Coordinator, BarrierReleasesEveryoneAndTimesOutWithAClearError) {
  Coordinator coord(coord_options(1, 2));
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker),
                         client_options(coord.endpoint(), NodeRole::kWorker)});
  // Two rounds of the same barrier name: every node passes both.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<void>> f;
    for (auto& n : nodes) {
      ClusterClient* c = n.get();
      f.push_back(std::async(std::launch::async, [c] { c->barrier("epoch", milliseconds(5000)); }));
    }
    for (auto& x : f) EXPECT_NO_THROW(x.get());
  }
  // A barrier is its role's: no worker passes before the last worker arrives; the server waits for no worker.
  std::atomic<int> passed{0};
  std::thread early([c = nodes[1].get(), &passed] {
    c->barrier("late", milliseconds(5000));
    ++passed;
  });
  EXPECT_NO_THROW(nodes[0]->barrier("late", milliseconds(2000)));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(passed.load(), 0);
  nodes[2]->barrier("late", milliseconds(5000));
  early.join();
  EXPECT_EQ(passed.load(), 1);

  // A barrier only one node enters times out with a message naming it.
  auto t0 = Clock::now();
  try {
    nodes[1]->barrier("lonely", milliseconds(300));
    FAIL() << "barrier passed with one node";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("barrier 'lonely'"), std::string::npos) << what;
    EXPECT_NE(what.find("timed out after 300 ms"), std::string::npos) << what;
  }
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
}

// A barrier whose entrants vote: every worker learns whether any of them raised its flag in that round, and the next
// round of the same name starts with no flag raised.
TEST(Coordinator, BarrierVoteTellsEveryWorkerWhetherAnyRaisedItsFlag) {
  Coordinator coord(coord_options(1, 3));
  coord.start();
  auto nodes = join_all(
      {client_options(coord.endpoint(), NodeRole::kServer), client_options(coord.endpoint(), NodeRole::kWorker),
       client_options(coord.endpoint(), NodeRole::kWorker), client_options(coord.endpoint(), NodeRole::kWorker)});
  // Round 0: nobody votes; round 1: only the last worker; round 2: nobody again.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<bool>> answers;
    for (size_t w = 1; w < nodes.size(); ++w) {
      ClusterClient* c = nodes[w].get();
      const bool vote = round == 1 && w == nodes.size() - 1;
      answers.push_back(std::async(
          std::launch::async, [c, vote] { return c->barrier_vote("finite gradients", vote, milliseconds(5000)); }));
    }
    for (auto& a : answers) EXPECT_EQ(a.get(), round == 1) << "round " << round;
  }
}

// cluster.batch_assignment = dynamic: two workers claiming an epoch's batches in turn get each batch once, in order,
// until none are left (count 0); a worker that counts the epoch's batches differently ends the job, saying so.
TEST(Coordinator, BatchClaimsHandEachBatchToOneWorkerAndAbortOnADifferentCount) {
  Coordinator coord(coord_options(1, 2));
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  std::vector<int64_t> owner(20, -1);
  for (int64_t epoch : {1, 2}) {
    int64_t next = 0;
    for (int turn = 0;; ++turn) {
      const size_t w = 1 + static_cast<size_t>(turn % 2);
      const ClusterClient::BatchGrant g = nodes[w]->claim_batches(epoch, 20, 8, milliseconds(3000));
      if (g.count == 0) break;
      EXPECT_EQ(g.first, next) << "epoch " << epoch;
      EXPECT_EQ(g.count, std::min<int64_t>(8, 20 - next));
      for (int64_t b = g.first; b < g.first + g.count; ++b) {
        if (epoch == 1) owner[static_cast<size_t>(b)] = static_cast<int64_t>(w);
      }
      next += g.count;
    }
    EXPECT_EQ(next, 20);
  }
  EXPECT_EQ(std::count(owner.begin(), owner.end(), 1), 12);  // [0, 8) and [16, 20)
  EXPECT_EQ(std::count(owner.begin(), owner.end(), 2), 8);
  EXPECT_EQ(nodes[2]->claim_batches(2, 20, 8, milliseconds(3000)).count, 0);  // taken: every later claim gets none

  EventLog log;
  log.attach(*nodes[0]);
  try {
    nodes[1]->claim_batches(3, 20, 8, milliseconds(3000));
    nodes[2]->claim_batches(3, 21, 8, milliseconds(3000));
    FAIL() << "a claim naming 21 batches of an epoch of 20 was granted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the job was aborted"), std::string::npos) << e.what();
  }
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("worker 1"), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find("holds 21 batches, an earlier one 20"), std::string::npos) << e.reason;
}

TEST(Coordinator, AllWorkersLeavingShutsTheJobDownCleanly) {
  Coordinator coord(coord_options(2, 1));
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker)});
  EventLog logs[2];
  logs[0].attach(*nodes[0]);
  logs[1].attach(*nodes[1]);
  nodes[2].reset();  // the destructor leaves with status 0
  for (auto& l : logs) {
    ClusterEvent e;
    ASSERT_TRUE(l.wait_for_kind(ClusterEvent::Kind::kShutdown, milliseconds(3000), &e));
  }
  EXPECT_TRUE(nodes[0]->stopping());
  nodes[0].reset();
  nodes[1].reset();
  auto r = coord.wait_for(milliseconds(3000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

TEST(Coordinator, WorkerLeavingWithFailureStatusAbortsUnderPolicyAbort) {
  Coordinator coord(coord_options(1, 2));
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  EventLog log;
  log.attach(*nodes[0]);
  nodes[2]->leave(3);
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("worker 1"), std::string::npos) << e.reason;
  EXPECT_NE(e.reason.find("exit status 3"), std::string::npos) << e.reason;
}

TEST(Coordinator, CombinesWorkerReportsIntoTheJobMetrics) {
  char tmpl[] = "/tmp/pshard_coord_metrics_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto opt = coord_options(1, 2);
  opt.run_dir = dir;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  nodes[1]->report(testing::minimal_event("start").set("model", "mlp").set("epochs", 1));
  nodes[1]->report(testing::minimal_event("step").set("epoch", 1).set("step", 0).set("loss", 2.5));
  // Reports off the events' declaration are refused, not written: an event it does not declare, a step line short of
  // a field.
  nodes[1]->report(Json::object().set("event", "progress").set("done", 0.5));
  nodes[1]->report(Json::object().set("event", "step").set("epoch", 1).set("step", 1).set("loss", 2.5));
  for (uint32_t w = 0; w < 2; ++w) {
    WorkerEpochReport r;
    r.rank = w;
    r.epoch = 1;
    r.step = 10;
    r.samples = 100 + w * 50;  // 100 and 150
    r.loss_sum = 50.0;
    r.correct = 60;
    r.epoch_s = 1.0;
    Json j = r.to_json();
    j.set("event", "worker_epoch");
    nodes[1 + w]->report(j);
  }
  end_job(nodes, 1);
  auto res = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->exit_code, 0) << res->reason;
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<Json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line, "metrics.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].at("event").as_string(), "start");
  EXPECT_EQ(lines[0].at("epochs").as_int(), 1);
  EXPECT_EQ(lines[1].at("event").as_string(), "step");
  EXPECT_EQ(lines[2].at("event").as_string(), "epoch");
  EXPECT_EQ(lines[2].at("epoch").as_int(), 1);
  EXPECT_NEAR(lines[2].at("train_loss").as_number(), 100.0 / 250.0, 1e-12);
  EXPECT_EQ(lines[3].at("event").as_string(), "summary");
  EXPECT_EQ(lines[3].at("model").as_string(), "mlp");
  EXPECT_EQ(lines[3].at("workers").as_int(), 2);
  ASSERT_EQ(lines[3].at("workers_finished").size(), 2u);
  std::filesystem::remove_all(dir);
}

// A worker that rejoined at step 12 (a restarted process) reports epochs from the one it rejoined in: the epochs that
// ended before are written without it, not held forever waiting for its report.
TEST(Coordinator, ARejoinedWorkerIsNotWaitedForInEpochsBeforeItsJoinStep) {
  char tmpl[] = "/tmp/pshard_coord_rejoin_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto opt = coord_options(1, 2);
  opt.run_dir = dir;
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  nodes[1]->report(testing::minimal_event("start").set("epochs", 3).set("steps_per_epoch", 10));
  nodes[2]->tell(ClusterClient::JobFact::kRejoined, 12);
  auto report = [&](uint32_t w, int64_t epoch) {
    WorkerEpochReport r;
    r.rank = w;
    r.epoch = epoch;
    r.step = epoch * 10;
    r.samples = 100;
    r.loss_sum = 50.0;
    r.epoch_s = 1.0;
    Json j = r.to_json();
    j.set("event", "worker_epoch");
    nodes[1 + w]->report(j);
  };
  report(0, 1);
  report(0, 2);
  report(1, 2);
  report(0, 3);
  report(1, 3);
  end_job(nodes, 1);
  auto res = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(res.has_value());
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<int64_t> epochs;
  std::vector<int64_t> samples;
  for (std::string line; std::getline(in, line);) {
    Json e = Json::parse(line, "metrics.jsonl");
    if (e.at("event").as_string() != "epoch") continue;
    epochs.push_back(e.at("epoch").as_int());
    samples.push_back(e.at("samples").as_int());
  }
  EXPECT_EQ(epochs, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(samples, (std::vector<int64_t>{100, 200, 200}));
  std::filesystem::remove_all(dir);
}

// An elastic job (min 1, max 3) starts with one worker; the ranks nobody holds are vacant. A worker registering
// while it runs joins at the next epoch's start: it gets the plan first, and the member waiting at that start gets it
// only once the joining worker answered that the servers count it (else a server could close the first step
// without it).
TEST(Coordinator, ElasticJobsSendAJoiningWorkerThePlanBeforeTheOtherMembers) {
  auto opt = coord_options(1, 3);
  opt.min_workers = 1;  // failure policy continue, whatever the options say
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all(
      {client_options(coord.endpoint(), NodeRole::kServer, 0), client_options(coord.endpoint(), NodeRole::kWorker)});
  const ClusterMap map = nodes[1]->map();
  EXPECT_EQ(map.min_workers, 1u);
  EXPECT_EQ(map.num_workers, 3u);
  EXPECT_FALSE(map.vacant(0));
  EXPECT_TRUE(map.vacant(1) && map.vacant(2));
  EXPECT_FALSE(nodes[1]->joins_running());

  std::optional<EpochPlan> first = nodes[1]->enter_epoch(1, 0, milliseconds(3000));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->epoch, 1);
  EXPECT_EQ(first->first_step, 0);
  EXPECT_EQ(first->members, (std::vector<uint32_t>{0}));
  EXPECT_FALSE(first->join);

  auto joiner = std::make_unique<ClusterClient>(client_options(coord.endpoint(), NodeRole::kWorker));
  EXPECT_TRUE(joiner->joins_running());
  EXPECT_EQ(joiner->rank(), 1u);
  // The joining worker asks first: a worker that registered but has not asked yet (it may still be starting) does not
  // hold an epoch's start up, and would join with the epoch after.
  auto asked = std::async(std::launch::async, [&] { return joiner->enter_epoch(0, -1, milliseconds(5000)); });
  std::this_thread::sleep_for(milliseconds(500));
  auto member = std::async(std::launch::async, [&] { return nodes[1]->enter_epoch(2, 10, milliseconds(5000)); });
  std::optional<EpochPlan> joining = asked.get();
  ASSERT_TRUE(joining.has_value());
  EXPECT_EQ(joining->epoch, 2);
  EXPECT_EQ(joining->first_step, 10);
  EXPECT_EQ(joining->members, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(joining->join);
  EXPECT_EQ(member.wait_for(milliseconds(300)), std::future_status::timeout)
      << "the member got the plan before the joining worker answered";
  joiner->epoch_joined(2);
  ASSERT_EQ(member.wait_for(milliseconds(3000)), std::future_status::ready);
  std::optional<EpochPlan> second = member.get();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->members, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(second->first_step, 10);
  EXPECT_FALSE(second->join);

  joiner.reset();
  nodes[1]->leave(0);
  for (auto deadline = Clock::now() + milliseconds(5000); !nodes[0]->stopping() && Clock::now() < deadline;) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  nodes[0]->leave(0);
  auto r = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->reason;
}

// Below its minimum (a worker died), an elastic job waits at the next epoch's start for a worker to join, and ends
// naming the minimum when none comes within the rendezvous timeout. Workers that disagree on where an epoch starts
// end the job too.
TEST(Coordinator, ElasticJobsWaitForTheirMinimumAndGiveUpAfterTheRendezvousTimeout) {
  auto opt = coord_options(1, 3);
  opt.min_workers = 2;
  opt.rendezvous_timeout = milliseconds(1500);
  Coordinator coord(opt);
  coord.start();
  auto nodes = join_all({client_options(coord.endpoint(), NodeRole::kServer, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 0),
                         client_options(coord.endpoint(), NodeRole::kWorker, 1)});
  auto other = std::async(std::launch::async, [&] { return nodes[2]->enter_epoch(1, 0, milliseconds(3000)); });
  ASSERT_TRUE(nodes[1]->enter_epoch(1, 0, milliseconds(3000)).has_value());
  ASSERT_TRUE(other.get().has_value());
  nodes[2]->leave(1, "it failed in epoch 1");
  try {
    nodes[1]->enter_epoch(2, 20, milliseconds(5000));
    ADD_FAILURE() << "epoch 2 began with one worker of at least two";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 2 has 1 worker, fewer than cluster.min_workers = 2, and none joined"),
              std::string::npos)
        << e.what();
  }
  auto r = coord.wait_for(milliseconds(5000));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);

  auto opt2 = coord_options(1, 2);
  opt2.min_workers = 2;
  Coordinator disagreeing(opt2);
  disagreeing.start();
  auto nodes2 = join_all({client_options(disagreeing.endpoint(), NodeRole::kServer, 0),
                          client_options(disagreeing.endpoint(), NodeRole::kWorker, 0),
                          client_options(disagreeing.endpoint(), NodeRole::kWorker, 1)});
  auto a = std::async(std::launch::async, [&] { return nodes2[1]->enter_epoch(1, 0, milliseconds(3000)); });
  EXPECT_THROW(nodes2[2]->enter_epoch(1, 7, milliseconds(3000)), Error);
  EXPECT_THROW(a.get(), Error);
  auto r2 = disagreeing.wait_for(milliseconds(5000));
  ASSERT_TRUE(r2.has_value());
  EXPECT_NE(r2->reason.find("the workers disagree on the first step of epoch 1"), std::string::npos) << r2->reason;
}

TEST(Coordinator, WritesTheClusterMapToClusterJsonInOnePiece) {
  char tmpl[] = "/tmp/pshard_coord_map_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto opt = coord_options(1, 1);
  opt.run_dir = dir;
  Coordinator coord(opt);
  coord.start();
  auto so = client_options(coord.endpoint(), NodeRole::kServer);
  so.endpoint = "tcp://10.0.0.2:40001";
  so.host = "node1";
  auto wo = client_options(coord.endpoint(), NodeRole::kWorker);
  wo.host = "node\"2";  // escaped in the file
  auto nodes = join_all({so, wo});
  // The map reaches the nodes just before the file is written; once the file exists, it is whole.
  const std::string path = dir + "/cluster.json";
  for (auto t0 = Clock::now(); !std::filesystem::exists(path) && Clock::now() - t0 < milliseconds(3000);) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // Spaced as scripts expect it (tests/launcher/scheduler/slurm_cluster_test.sh greps '"role": "server"').
  const std::string expected =
      R"({"num_servers": 1, "num_workers": 1, "nodes": [)"
      R"({"role": "server", "rank": 0, "host": "node1", "pid": PID, "endpoint": "tcp://10.0.0.2:40001"}, )"
      R"({"role": "worker", "rank": 0, "host": "node\"2", "pid": PID, "endpoint": ""}]})"
      "\n";
  const std::string pid = std::to_string(nodes[0]->map().servers[0].pid);
  EXPECT_EQ(text.str(), std::regex_replace(expected, std::regex("PID"), pid));
  EXPECT_FALSE(std::filesystem::exists(dir + "/.cluster.json.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(ClusterClient, StoppedCoordinatorAbortsEveryNode) {
  auto opt = coord_options(1, 1);
  auto coord = std::make_unique<Coordinator>(opt);
  coord->start();
  auto so = client_options(coord->endpoint(), NodeRole::kServer);
  auto wo = client_options(coord->endpoint(), NodeRole::kWorker);
  so.heartbeat_timeout = wo.heartbeat_timeout = milliseconds(500);
  auto nodes = join_all({so, wo});
  EventLog log;
  log.attach(*nodes[0]);
  // Stop the coordinator: it broadcasts an abort first.
  coord->request_stop("test over");
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("coordinator stopped: test over"), std::string::npos) << e.reason;
}

TEST(ClusterClient, SilentCoordinatorBecomesALocalAbort) {
  // A fake coordinator that answers the registration with a map and then
  // never speaks again.
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  transport::PeerAuthenticator auth(ctx, router, {}, "token-A", "fake coordinator");
  router.bind("tcp://127.0.0.1:0");
  std::string ep = router.get(zmq::sockopt::last_endpoint);
  std::thread fake([&] {
    router.set(zmq::sockopt::rcvtimeo, 5000);
    zmq::message_t id, frame;
    if (!router.recv(id) || !router.recv(frame)) return;
    capnp::MallocMessageBuilder b;
    auto cm = b.initRoot<control::ControlMessage>().initClusterMap();
    cm.setNumServers(0);
    cm.setNumWorkers(1);
    NodeInfo me;
    me.host = "h";
    control_codec::fill_node(me, cm.initWorkers(1)[0]);
    zmq::message_t out = control_codec::encode(b);
    router.send(id, zmq::send_flags::sndmore);
    router.send(out, zmq::send_flags::none);
  });
  auto o = client_options(ep, NodeRole::kWorker);
  o.heartbeat_timeout = milliseconds(300);
  ClusterClient c(o);
  fake.join();
  EventLog log;
  log.attach(c);
  auto t0 = Clock::now();
  ClusterEvent e;
  ASSERT_TRUE(log.wait_for_kind(ClusterEvent::Kind::kAbort, milliseconds(3000), &e));
  EXPECT_NE(e.reason.find("silent"), std::string::npos) << e.reason;
  EXPECT_LT(Clock::now() - t0, milliseconds(1500));
  EXPECT_TRUE(c.stopping());
}

TEST(ClusterClient, NoCoordinatorMeansABoundedRendezvousError) {
  ClusterClient::Options o = client_options("tcp://127.0.0.1:1", NodeRole::kWorker);
  o.rendezvous_timeout = milliseconds(300);
  auto t0 = Clock::now();
  EXPECT_THROW(ClusterClient c(o), Error);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
}

}  // namespace
}  // namespace pshard
