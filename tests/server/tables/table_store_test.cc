// TableStore without sockets: rows made from the seed, the synchronous step of a table (rank-ordered mean of the rows
// pushed, reads held until it closes, a dead worker), async pushes, a hashed table through a checkpoint file, rows
// stored as bf16, and every refusal naming the table and step and changing nothing.
#include "server/tables/table_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/util/bf16.h"

namespace pshard {
namespace {

using protocol::ErrorCode;
using protocol::MessageType;

const TableSpec kSpec{"items", 10, 3, TableInit::kNormal, 0.5f};
constexpr uint64_t kSeed = 42;

TableStoreOptions options(Consistency mode, const std::string& rule, uint32_t server = 0, uint32_t servers = 1) {
  optim::OptimizerParams p;
  p.name = rule;
  p.eps = 1e-10f;
  return TableStoreOptions{server, servers, 2, mode, optim::make_optimizer(p), 0.1f, 4};
}

protocol::Message table_init(uint32_t worker, TableSpec spec = kSpec, uint64_t seed = kSeed) {
  protocol::Message m;
  m.type = MessageType::TABLE_INIT;
  m.sender_rank = worker;
  m.table_seed = seed;
  m.tables.push_back({spec.name, spec.rows, spec.dim, protocol::TableInit::NORMAL, spec.init_scale, spec.hashed,
                      spec.admit_after, spec.expire_after, spec.bf16});
  return m;
}

RequestPtr rows_request(MessageType type, uint32_t worker, int64_t step, const std::vector<uint64_t>& ids,
                        const std::vector<float>& grads = {}) {
  auto r = std::make_shared<Request>();
  r->msg.type = type;
  r->msg.sender_rank = worker;
  r->msg.step = step;
  r->msg.table = 0;
  r->payloads.push_back(std::make_shared<zmq::message_t>(ids.data(), ids.size() * sizeof(uint64_t)));
  if (type == MessageType::ROW_PUSH) {
    r->payloads.push_back(std::make_shared<zmq::message_t>(grads.data(), grads.size() * sizeof(float)));
  }
  return r;
}

std::vector<float> initial(uint64_t row) {
  std::vector<float> v(kSpec.dim);
  table_initial_row(kSpec, kSeed, row, v.data());
  return v;
}

std::vector<float> reply_rows(const Request& r) {
  std::vector<float> v(r.replies.at(0).size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), r.replies[0].data(), r.replies[0].size());  // no rows: no copy (nullptr)
  return v;
}

std::vector<float> row_of(const TableStore& t, uint64_t row) {
  std::vector<float> v(kSpec.dim);
  t.shard(0).read(row, v.data());
  return v;
}

TEST(TableStore, RowsStartFromTheSeedAndEachServerHoldsEverySthRow) {
  TableStore a(options(Consistency::kBsp, "sgd", 0, 2)), b(options(Consistency::kBsp, "sgd", 1, 2));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(a.declare(table_init(0), code, why)) << why;
  ASSERT_TRUE(b.declare(table_init(1), code, why)) << why;
  EXPECT_EQ(a.shard(0).local_rows(), 5u);
  EXPECT_EQ(b.shard(0).local_rows(), 5u);
  for (uint64_t r = 0; r < kSpec.rows; ++r) {
    const TableStore& holder = r % 2 == 0 ? a : b;
    EXPECT_TRUE(holder.shard(0).holds(r));
    EXPECT_FALSE((r % 2 == 0 ? b : a).shard(0).holds(r));
    EXPECT_EQ(row_of(holder, r), initial(r)) << "row " << r;
  }
  // Another seed or another name gives other values; N(0, 0.5^2) over many values.
  std::vector<float> other(kSpec.dim);
  table_initial_row(kSpec, kSeed + 1, 3, other.data());
  EXPECT_NE(other, initial(3));
  TableSpec big{"big", 20000, 4, TableInit::kNormal, 0.5f};
  double sum = 0, sq = 0;
  std::vector<float> v(4);
  for (uint64_t r = 0; r < big.rows; ++r) {
    table_initial_row(big, 7, r, v.data());
    for (float x : v) sum += x, sq += double(x) * x;
  }
  const double n = 80000, mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 0.5, 0.01);
}

TEST(TableStore, ASecondDeclarationMustMatch) {
  TableStore t(options(Consistency::kBsp, "sgd"));
  ErrorCode code = ErrorCode::NONE;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  EXPECT_TRUE(t.declare(table_init(1), code, why)) << why;
  TableSpec other = kSpec;
  other.dim = 4;
  EXPECT_FALSE(t.declare(table_init(1, other), code, why));
  EXPECT_EQ(code, ErrorCode::LAYOUT_MISMATCH);
  EXPECT_NE(why.find("items (10 x 3)"), std::string::npos) << why;
  EXPECT_FALSE(t.declare(table_init(1, kSpec, kSeed + 1), code, why));
}

TEST(TableStore, ASyncStepClosesWhenEveryWorkerPushedWithTheRankOrderedMeanOfTheRowsPushed) {
  TableStore t(options(Consistency::kBsp, "sgd"));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  // Step 0: worker 0 reads rows 1 and 4, worker 1 reads 4 and 7.
  auto r0 = t.run(rows_request(MessageType::ROW_PULL, 0, 0, {4, 1}));
  ASSERT_EQ(r0.size(), 1u);
  std::vector<float> expect = initial(4);
  const std::vector<float> one = initial(1);
  expect.insert(expect.end(), one.begin(), one.end());
  EXPECT_EQ(reply_rows(*r0[0]), expect);  // in the request's order
  ASSERT_EQ(t.run(rows_request(MessageType::ROW_PULL, 1, 0, {4, 7})).size(), 1u);
  // Worker 0 pushes; worker 1's read of step 1 waits for the step to close.
  auto p0 = t.run(rows_request(MessageType::ROW_PUSH, 0, 0, {1, 4}, {1, 2, 3, 0.5f, 0.25f, 0.125f}));
  ASSERT_EQ(p0.size(), 1u);
  EXPECT_EQ(p0[0]->error, ErrorCode::NONE) << p0[0]->error_message;
  EXPECT_TRUE(t.run(rows_request(MessageType::ROW_PULL, 0, 1, {4})).empty());
  EXPECT_EQ(t.waiting(), 1u);
  EXPECT_EQ(row_of(t, 4), initial(4));  // nothing applied before the step closes
  auto p1 = t.run(rows_request(MessageType::ROW_PUSH, 1, 0, {7, 4}, {2, 2, 2, 1.5f, -0.25f, 1}));
  ASSERT_EQ(p1.size(), 2u);  // the push, then the read it released
  EXPECT_EQ(p1[0]->msg.type, MessageType::ROW_PUSH);
  EXPECT_EQ(p1[1]->msg.type, MessageType::ROW_PULL);
  EXPECT_EQ(t.version(0), 1);
  // sgd, lr 0.1: w -= lr * sum / 2, the sum in rank order; rows no worker pushed are unchanged.
  const float g4[3] = {(0.5f + 1.5f) / 2, (0.25f + -0.25f) / 2, (0.125f + 1.0f) / 2};
  const float g1[3] = {1.0f / 2, 2.0f / 2, 3.0f / 2};
  const float g7[3] = {2.0f / 2, 2.0f / 2, 2.0f / 2};
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(row_of(t, 4)[c], initial(4)[c] - 0.1f * g4[c]);
    EXPECT_EQ(row_of(t, 1)[c], initial(1)[c] - 0.1f * g1[c]);
    EXPECT_EQ(row_of(t, 7)[c], initial(7)[c] - 0.1f * g7[c]);
  }
  EXPECT_EQ(row_of(t, 2), initial(2));
  EXPECT_EQ(reply_rows(*p1[1]), row_of(t, 4));
}

TEST(TableStore, AdagradStateChangesOnlyForTheRowsAStepTouched) {
  TableStore t(options(Consistency::kBsp, "adagrad"));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  std::vector<float> w2 = initial(2), w5 = initial(5);
  float s2[3] = {0, 0, 0};
  for (int64_t step = 0; step < 3; ++step) {
    // Row 2 every step from worker 0; row 5 only at step 1, from worker 1; worker 1 pushes no rows otherwise.
    t.run(rows_request(MessageType::ROW_PULL, 0, step, {2}));
    const std::vector<uint64_t> ids1 = step == 1 ? std::vector<uint64_t>{5} : std::vector<uint64_t>{};
    t.run(rows_request(MessageType::ROW_PULL, 1, step, ids1));
    const std::vector<float> g = {1.0f + step, -1.0f, 0.5f};
    t.run(rows_request(MessageType::ROW_PUSH, 0, step, {2}, g));
    auto done = t.run(rows_request(MessageType::ROW_PUSH, 1, step, ids1, step == 1 ? g : std::vector<float>{}));
    ASSERT_EQ(done[0]->error, ErrorCode::NONE) << done[0]->error_message;
    for (int c = 0; c < 3; ++c) {
      const float mean = g[c] / 2;
      s2[c] += mean * mean;
      w2[c] -= 0.1f * mean / (std::sqrt(s2[c]) + 1e-10f);
      if (step == 1) w5[c] -= 0.1f * mean / (std::sqrt(mean * mean) + 1e-10f);
    }
  }
  EXPECT_EQ(t.version(0), 3);
  EXPECT_EQ(row_of(t, 2), w2);
  EXPECT_EQ(row_of(t, 5), w5);
}

TEST(TableStore, ADeadWorkerNoLongerHoldsTheStep) {
  TableStore t(options(Consistency::kBsp, "sgd"));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  t.run(rows_request(MessageType::ROW_PULL, 0, 0, {3}));
  t.run(rows_request(MessageType::ROW_PUSH, 0, 0, {3}, {1, 1, 1}));
  EXPECT_TRUE(t.run(rows_request(MessageType::ROW_PULL, 0, 1, {3})).empty());
  auto released = t.worker_dead(1);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(t.version(0), 1);
  EXPECT_EQ(row_of(t, 3)[0], initial(3)[0] - 0.1f * 1.0f);  // the mean over the one worker that pushed
}

TEST(TableStore, ADeadWorkerThatReadsAgainIsCountedFromThatStep) {
  TableStore t(options(Consistency::kBsp, "sgd"));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  t.worker_dead(1);
  for (int64_t step = 0; step < 3; ++step) {  // worker 0 alone
    t.run(rows_request(MessageType::ROW_PULL, 0, step, {2}));
    t.run(rows_request(MessageType::ROW_PUSH, 0, step, {2}, {1, 1, 1}));
  }
  EXPECT_EQ(t.version(0), 3);
  // Worker 1, restarted, rejoins at step 5: steps 3 and 4 close without it, step 5 waits for it.
  EXPECT_TRUE(t.run(rows_request(MessageType::ROW_PULL, 1, 5, {2})).empty());
  for (int64_t step = 3; step < 6; ++step) {
    t.run(rows_request(MessageType::ROW_PULL, 0, step, {2}));
    t.run(rows_request(MessageType::ROW_PUSH, 0, step, {2}, {1, 1, 1}));
  }
  EXPECT_EQ(t.version(0), 5);
  const float before = row_of(t, 2)[0];
  auto done = t.run(rows_request(MessageType::ROW_PUSH, 1, 5, {2}, {3, 3, 3}));
  ASSERT_EQ(done.at(0)->error, ErrorCode::NONE) << done[0]->error_message;
  EXPECT_EQ(t.version(0), 6);
  EXPECT_EQ(row_of(t, 2)[0], before - 0.1f * ((1.0f + 3.0f) / 2));  // the mean over both again
}

TEST(TableStore, AsyncPushesApplyAtOnceAndReadsNeverWait) {
  TableStore t(options(Consistency::kAsp, "sgd"));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  ASSERT_EQ(t.run(rows_request(MessageType::ROW_PULL, 1, 5, {0})).size(), 1u);
  t.run(rows_request(MessageType::ROW_PUSH, 1, 5, {0}, {2, 4, 6}));
  EXPECT_EQ(row_of(t, 0)[2], initial(0)[2] - 0.1f * 6.0f);  // its own gradient, not a mean
  EXPECT_EQ(t.run(rows_request(MessageType::ROW_PULL, 0, 9, {0})).size(), 1u);
  EXPECT_EQ(t.version(0), 1);
}

// A refused request names the table and step and changes nothing.
void expect_refused(TableStore& t, const RequestPtr& r, ErrorCode code, const std::string& text) {
  const std::vector<float> before = row_of(t, 1);
  auto out = t.run(r);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]->error, code) << out[0]->error_message;
  EXPECT_NE(out[0]->error_message.find(text), std::string::npos) << out[0]->error_message;
  EXPECT_EQ(row_of(t, 1), before);
}

TEST(TableStore, BadRequestsAreRefusedNamingTheTableAndStep) {
  TableStore t(options(Consistency::kBsp, "sgd"));
  ErrorCode code;
  std::string why;
  auto early = t.run(rows_request(MessageType::ROW_PULL, 0, 0, {1}));
  EXPECT_EQ(early.at(0)->error, ErrorCode::UNKNOWN_TABLE);
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  expect_refused(t, rows_request(MessageType::ROW_PULL, 0, 0, {1, 10}), ErrorCode::BAD_ROW,
                 "table items, step 0 from worker 0: row 10 is outside the table (10 rows)");
  expect_refused(t, rows_request(MessageType::ROW_PULL, 0, 0, {1, 2, 1}), ErrorCode::DUPLICATE_ROW,
                 "table items, step 0 from worker 0: row 1 is listed twice");
  expect_refused(t, rows_request(MessageType::ROW_PULL, 0, 0, {0, 1, 2, 3, 4}), ErrorCode::TOO_MANY_ROWS,
                 "5 rows, more than cluster.max_rows_per_request = 4");
  t.run(rows_request(MessageType::ROW_PULL, 0, 0, {1, 2}));
  expect_refused(t, rows_request(MessageType::ROW_PUSH, 0, 0, {1, 3}, std::vector<float>(6, 1.0f)),
                 ErrorCode::ROW_NOT_PULLED, "table items, step 0 from worker 0: row 3 was not pulled by this worker");
  expect_refused(t, rows_request(MessageType::ROW_PUSH, 0, 0, {1}, std::vector<float>(2, 1.0f)),
                 ErrorCode::WRONG_LENGTH, "8 bytes of gradients for 1 rows of 3 values, expected 12");
  expect_refused(t, rows_request(MessageType::ROW_PUSH, 0, 0, {1}, {1, NAN, 1}), ErrorCode::NON_FINITE_GRADIENT,
                 "the gradient of row 1 holds nan at column 1");
  t.run(rows_request(MessageType::ROW_PULL, 0, 3, {1}));
  expect_refused(t, rows_request(MessageType::ROW_PUSH, 0, 3, {1}, {1, 1, 1}), ErrorCode::BAD_STEP,
                 "table items, step 3 from worker 0: the table's open step is 0");
  t.run(rows_request(MessageType::ROW_PULL, 0, 0, {1}));
  ASSERT_EQ(t.run(rows_request(MessageType::ROW_PUSH, 0, 0, {1}, {1, 1, 1})).at(0)->error, ErrorCode::NONE);
  const std::vector<float> pending = row_of(t, 1);
  auto again = t.run(rows_request(MessageType::ROW_PUSH, 0, 0, {1}, {1, 1, 1}));
  EXPECT_EQ(again.at(0)->error, ErrorCode::DUPLICATE_PUSH);
  EXPECT_EQ(row_of(t, 1), pending);
  auto other = rows_request(MessageType::ROW_PULL, 0, 0, {1});
  other->msg.table = 1;
  expect_refused(t, other, ErrorCode::UNKNOWN_TABLE, "table 1 does not exist (the job has 1 embedding tables)");
}

TEST(TableStore, HashedRowsAreMadeOnAdmissionAndDroppedWhenUnused) {
  TableStoreOptions o = options(Consistency::kBsp, "sgd");
  o.num_workers = 1;
  TableStore t(o);
  // Any 64-bit ids, at most 2 rows, stored once pushes held an id in 2 steps, dropped after 4 steps unused.
  const TableSpec hashed{"clicks", 2, 3, TableInit::kNormal, 0.5f, true, 2, 4};
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0, hashed), code, why)) << why;
  const uint64_t a = (uint64_t(1) << 63) + 5, b = 12345678901234ull, c = 77;
  std::vector<float> a0(3);
  table_initial_row(hashed, kSeed, a, a0.data());
  auto step = [&](int64_t s, const std::vector<uint64_t>& ids) {
    auto read = t.run(rows_request(MessageType::ROW_PULL, 0, s, ids));
    EXPECT_EQ(read.size(), 1u);
    auto pushed = t.run(rows_request(MessageType::ROW_PUSH, 0, s, ids, std::vector<float>(ids.size() * 3, 1.0f)));
    EXPECT_EQ(pushed.at(0)->error, ErrorCode::NONE) << pushed[0]->error_message;
    return reply_rows(*read.at(0));
  };
  EXPECT_EQ(step(0, {a}), a0);  // not stored: the row it would start as
  EXPECT_EQ(t.shard(0).counts().not_admitted, 1u);
  EXPECT_EQ(step(1, {a}), a0);  // the second step that holds it admits it, and applies this step's gradient
  EXPECT_EQ(t.shard(0).counts().admitted, 1u);
  std::vector<float> a1 = a0;
  for (float& x : a1) x -= 0.1f * 1.0f;
  std::vector<float> b0(3);
  table_initial_row(hashed, kSeed, b, b0.data());
  EXPECT_EQ(step(2, {a, b}), std::vector<float>({a1[0], a1[1], a1[2], b0[0], b0[1], b0[2]}));
  step(3, {b});  // b admitted: the table is full
  step(4, {c});
  step(5, {c});  // c seen twice, but no room
  EXPECT_EQ(t.shard(0).counts().held, 2u);
  EXPECT_EQ(t.shard(0).counts().not_admitted, 4u);  // a at 0, b at 2, c at 4 and 5
  // a was last pushed at step 2: at step 7 it has been unused for more than 4 steps and is dropped.
  step(6, {});
  step(7, {});
  EXPECT_EQ(t.shard(0).counts().expired, 2u);  // a (last pushed at 2) and b (at 3)
  EXPECT_EQ(t.shard(0).counts().held, 0u);
  EXPECT_EQ(step(8, {a}), a0);  // gone: it starts again from its id
  const Json stats = t.stats();
  EXPECT_EQ(stats.dump(),
            "[{\"table\":\"clicks\",\"bytes\":24,\"rows_held\":0,\"admitted\":2,\"expired\":2,"
            "\"not_admitted\":5}]");
}

// A hashed table is checkpointed with its rows, their ids, optimizer state and last steps, the ids not admitted yet
// and its counts: a store restored from the file (written and read back) goes on exactly as the one that went on.
TEST(TableStore, AHashedTableResumesFromItsCheckpointAsItWouldHaveGoneOn) {
  TableStoreOptions o = options(Consistency::kBsp, "adagrad");
  o.num_workers = 1;
  // At most 4 rows, made once pushes held an id in 2 steps, dropped after 3 steps unused.
  const TableSpec hashed{"clicks", 4, 3, TableInit::kNormal, 0.5f, true, 2, 3};
  auto make = [&](TableStore& t) {
    ErrorCode code;
    std::string why;
    ASSERT_TRUE(t.declare(table_init(0, hashed), code, why)) << why;
  };
  auto ids_of = [](int64_t s) {  // a few recurring ids, one that comes back after expiring, some seen once
    std::vector<uint64_t> ids = {uint64_t(1) << 63, 5, static_cast<uint64_t>(100 + s)};
    if (s % 5 < 2) ids.push_back(7);
    return ids;
  };
  auto step = [&](TableStore& t, int64_t s) {
    const std::vector<uint64_t> ids = ids_of(s);
    std::vector<float> g(ids.size() * 3);
    for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.7f * static_cast<float>(i) + static_cast<float>(s));
    auto read = t.run(rows_request(MessageType::ROW_PULL, 0, s, ids));
    auto pushed = t.run(rows_request(MessageType::ROW_PUSH, 0, s, ids, g));
    EXPECT_EQ(pushed.at(0)->error, ErrorCode::NONE) << pushed[0]->error_message;
    return reply_rows(*read.at(0));
  };
  TableStore went_on(o), resumed(o);
  make(went_on);
  for (int64_t s = 0; s < 12; ++s) step(went_on, s);
  ASSERT_GT(went_on.shard(0).counts().expired, 0u);
  const std::string dir = "/tmp/pshard-table-store-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ServerCheckpoint c;
  c.num_servers = 1;
  c.num_workers = 1;
  c.step = 12;
  c.slice_bytes = 40;
  c.optimizer = "adagrad";
  c.state_floats = 1;
  c.tensors = {{"w", 10}};  // (a checkpoint holds the job's dense part too)
  c.layout_fingerprint = SliceLayout(c.tensors, c.slice_bytes, 1).fingerprint();
  c.slices.push_back(CheckpointSlice{0, 12, 12, std::vector<float>(10, 0.5f), std::vector<float>(10, 0.0f)});
  c.tables.push_back(went_on.snapshot(0));
  EXPECT_EQ(c.tables[0].ids.size(), went_on.shard(0).counts().held);
  EXPECT_FALSE(c.tables[0].pending.empty());
  write_checkpoint(checkpoint_path(dir, 0, 12), c);
  resumed.restore(read_checkpoint(checkpoint_path(dir, 0, 12)).tables);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(resumed.stats().dump(), went_on.stats().dump());
  for (int64_t s = 12; s < 30; ++s) EXPECT_EQ(step(resumed, s), step(went_on, s)) << "step " << s;
  EXPECT_EQ(resumed.stats().dump(), went_on.stats().dump());
  for (uint64_t id : {uint64_t(1) << 63, uint64_t(5), uint64_t(7), uint64_t(129)}) {
    std::vector<float> a(3), b(3);
    went_on.shard(0).read(id, a.data());
    resumed.shard(0).read(id, b.data());
    EXPECT_EQ(a, b) << "id " << id;
  }
}

// embedding.storage = bf16: rows start as their bf16 rounding, each update is computed in float32 from the stored row
// and rounded to nearest even, the rows take half the bytes, and a checkpoint keeps them exactly.
TEST(TableStore, Bf16RowsAreUpdatedInFloat32AndStoredRounded) {
  TableStoreOptions o = options(Consistency::kBsp, "sgd");
  o.num_workers = 1;
  TableSpec spec = kSpec;
  spec.bf16 = true;
  TableStore t(o), f32(o);
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0, spec), code, why)) << why;
  ASSERT_TRUE(f32.declare(table_init(0, kSpec), code, why)) << why;
  EXPECT_TRUE(t.shard(0).spec().bf16);
  EXPECT_EQ(t.shard(0).bytes() * 2, f32.shard(0).bytes());
  auto bf16 = [](float x) { return from_bf16(to_bf16(x)); };
  const std::vector<float> start = initial(4);
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(row_of(t, 4)[j], bf16(start[j])) << j;
  std::vector<float> expected = row_of(t, 4);
  for (int64_t s = 0; s < 3; ++s) {
    const std::vector<float> g = {0.3f, -1.7f, 1e-4f};
    t.run(rows_request(MessageType::ROW_PULL, 0, s, {4}));
    auto pushed = t.run(rows_request(MessageType::ROW_PUSH, 0, s, {4}, g));
    ASSERT_EQ(pushed.at(0)->error, ErrorCode::NONE) << pushed[0]->error_message;
    for (size_t j = 0; j < 3; ++j) expected[j] = bf16(expected[j] - 0.1f * g[j]);  // sgd at lr 0.1
    EXPECT_EQ(row_of(t, 4), expected) << "step " << s;
  }
  const CheckpointTable c = t.snapshot(0);
  EXPECT_TRUE(c.spec.bf16);
  TableStore back(o);
  back.restore({c});
  for (uint64_t r = 0; r < kSpec.rows; ++r) EXPECT_EQ(row_of(back, r), row_of(t, r)) << "row " << r;
}

TEST(TableStore, TablesBiggerThanTheServersMemoryAreRefused) {
  TableStoreOptions o = options(Consistency::kBsp, "adagrad", 0, 2);
  o.max_bytes = 1000;  // this server holds 5 rows x 3 x 4 bytes x (1 + 1 state plane) = 120 bytes of "items"
  TableStore t(o);
  ErrorCode code = ErrorCode::NONE;
  std::string why;
  EXPECT_TRUE(t.declare(table_init(0), code, why)) << why;
  TableStore big(o);
  TableSpec huge{"huge", uint64_t(1) << 40, 64, TableInit::kNormal, 1.0f};
  EXPECT_FALSE(big.declare(table_init(0, huge), code, why));
  EXPECT_EQ(code, ErrorCode::BAD_HEADER);
  EXPECT_NE(why.find("on server 0 of 2, more than its"), std::string::npos) << why;
  EXPECT_FALSE(big.declared());
}

TEST(TableStore, ARowOfAnotherServerIsRefused) {
  TableStore t(options(Consistency::kBsp, "sgd", 1, 2));
  ErrorCode code;
  std::string why;
  ASSERT_TRUE(t.declare(table_init(0), code, why));
  auto out = t.run(rows_request(MessageType::ROW_PULL, 0, 0, {1, 2}));
  EXPECT_EQ(out.at(0)->error, ErrorCode::BAD_ROW);
  EXPECT_NE(out[0]->error_message.find("row 2 lives on server 0, not on server 1"), std::string::npos);
}

TEST(TableStore, LayerWiseRulesAreRefusedForTablesOnly) {
  optim::OptimizerParams p;
  p.name = "lamb";
  TableStore t(TableStoreOptions{0, 1, 1, Consistency::kBsp, optim::make_optimizer(p), 0.1f, 4});  // dense jobs: fine
  ErrorCode code = ErrorCode::NONE;
  std::string why;
  EXPECT_FALSE(t.declare(table_init(0), code, why));
  EXPECT_EQ(code, ErrorCode::BAD_HEADER);
  EXPECT_NE(why.find("the embedding tables' rule is lamb"), std::string::npos) << why;
  EXPECT_FALSE(t.declared());
}

}  // namespace
}  // namespace pshard
