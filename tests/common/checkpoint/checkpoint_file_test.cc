// Checkpoint files: round trip, truncated and corrupt files, the newest complete step, pruning, and that a run only
// ever sees its own files (the run id in the header).
#include "common/checkpoint/checkpoint_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/checkpoint/residual_file.h"
#include "common/error.h"

namespace pshard {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string dir = "/tmp/pshard-ckpt-test-" + std::to_string(::getpid()) + "-" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Server `rank` of 2, tensors a (25 floats) and b (10): slices of 10 floats, momentum-like state.
ServerCheckpoint sample(uint32_t rank, int64_t step, const std::string& run_id = "run-a") {
  ServerCheckpoint c;
  c.run_id = run_id;
  c.settings_hash = 0x1234abcd5678ef00ull;
  c.server_rank = rank;
  c.num_servers = 2;
  c.num_workers = 3;
  c.step = step;
  c.run_total_steps = 1000;
  c.slice_bytes = 40;
  c.state_floats = 1;
  c.optimizer = "momentum";
  c.tensors = {{"a", 25}, {"b", 10}};
  SliceLayout layout(c.tensors, c.slice_bytes, c.num_servers);
  c.layout_fingerprint = layout.fingerprint();
  for (uint32_t id = 0; id < layout.slices().size(); ++id) {
    if (layout.slice(id).server != rank) continue;
    CheckpointSlice s;
    s.id = id;
    s.version = step;
    s.updates = step + id;
    for (uint64_t i = 0; i < layout.slice(id).length; ++i) {
      s.weights.push_back(0.5f * static_cast<float>(id) + 0.001f * static_cast<float>(i) + static_cast<float>(step));
      s.opt_state.push_back(-static_cast<float>(i));
    }
    c.slices.push_back(s);
  }
  return c;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string error_of(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckpointFile, EmbeddingTablesRoundTripInTableOrderAndAreChecked) {
  const std::string dir = fresh_dir("tables");
  ServerCheckpoint c = sample(1, 40);
  // Server 1 of 2 holds rows 1, 3, 5, 7, 9 of "users" (10 x 3) and rows 1, 3 of "items" (4 x 2).
  const TableSpec users{"users", 10, 3, TableInit::kUniform, 0.25f}, items{"items", 4, 2, TableInit::kZeros, 0.0f};
  for (const TableSpec& spec : {users, items}) {
    CheckpointTable t;
    t.table = static_cast<uint32_t>(c.tables.size());
    t.spec = spec;
    t.seed = 77;
    t.version = 40;
    t.optimizer = "adagrad";
    t.state_floats = 1;
    const uint64_t values = table_rows_on(spec.rows, 2, 1) * spec.dim;
    for (uint64_t i = 0; i < values; ++i) {
      t.values.push_back(0.125f * static_cast<float>(i) - 1.0f);
      t.state.push_back(static_cast<float>(i * i));
    }
    c.tables.push_back(t);
  }
  const std::string path = checkpoint_path(dir, 1, 40);
  write_checkpoint(path, c);
  const ServerCheckpoint r = read_checkpoint(path);
  ASSERT_EQ(r.tables.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.tables[i].table, i);
    EXPECT_EQ(r.tables[i].spec.name, c.tables[i].spec.name);
    EXPECT_EQ(r.tables[i].spec.rows, c.tables[i].spec.rows);
    EXPECT_EQ(r.tables[i].spec.dim, c.tables[i].spec.dim);
    EXPECT_EQ(r.tables[i].spec.init, c.tables[i].spec.init);
    EXPECT_EQ(r.tables[i].spec.init_scale, c.tables[i].spec.init_scale);
    EXPECT_EQ(r.tables[i].seed, 77u);
    EXPECT_EQ(r.tables[i].version, 40);
    EXPECT_EQ(r.tables[i].optimizer, "adagrad");
    EXPECT_EQ(r.tables[i].values, c.tables[i].values);
    EXPECT_EQ(r.tables[i].state, c.tables[i].state);
  }
  EXPECT_EQ(r.tables[0].values.size(), 15u);
  EXPECT_EQ(r.tables[1].values.size(), 4u);
  // Rows that do not fit this server's share are refused when written.
  c.tables[0].values.pop_back();
  try {
    write_checkpoint(path, c);
    FAIL() << "a table of the wrong size was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embedding table users (10 x 3) has 14 values"), std::string::npos)
        << e.what();
  }
  // A flipped byte in a table's rows is caught by the CRC.
  std::string bytes = slurp(path);
  bytes[bytes.size() - 12] ^= 0x40;
  spit(path, bytes);
  EXPECT_NE(error_of(path).find("CRC mismatch"), std::string::npos) << error_of(path);
}

TEST(CheckpointFile, RoundTripKeepsEveryField) {
  const std::string dir = fresh_dir("roundtrip");
  const ServerCheckpoint c = sample(1, 40);
  ASSERT_FALSE(c.slices.empty());
  const std::string path = checkpoint_path(dir, 1, 40);
  EXPECT_EQ(fs::path(path).filename(), "server-1.step-00000040.ckpt");
  write_checkpoint(path, c);
  EXPECT_FALSE(fs::exists(dir + "/.server-1.step-00000040.ckpt.tmp"));  // renamed into place
  const ServerCheckpoint r = read_checkpoint(path);
  EXPECT_EQ(r.run_id, "run-a");
  EXPECT_EQ(r.settings_hash, 0x1234abcd5678ef00ull);
  EXPECT_EQ(read_checkpoint_run_id(path), "run-a");
  EXPECT_EQ(r.server_rank, 1u);
  EXPECT_EQ(r.num_servers, 2u);
  EXPECT_EQ(r.num_workers, 3u);
  EXPECT_EQ(r.step, 40);
  EXPECT_EQ(r.run_total_steps, 1000);
  EXPECT_EQ(r.optimizer, "momentum");
  EXPECT_EQ(r.layout_fingerprint, c.layout_fingerprint);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(r.tensors[0].name, "a");
  EXPECT_EQ(r.tensors[1].numel, 10u);
  ASSERT_EQ(r.slices.size(), c.slices.size());
  for (size_t i = 0; i < c.slices.size(); ++i) {
    EXPECT_EQ(r.slices[i].id, c.slices[i].id);
    EXPECT_EQ(r.slices[i].updates, c.slices[i].updates);
    EXPECT_EQ(r.slices[i].weights, c.slices[i].weights);
    EXPECT_EQ(r.slices[i].opt_state, c.slices[i].opt_state);
  }
  fs::remove_all(dir);
}

TEST(CheckpointFile, TruncatedFileIsAnErrorNamingTheFile) {
  const std::string dir = fresh_dir("truncated");
  const std::string path = checkpoint_path(dir, 0, 8);
  write_checkpoint(path, sample(0, 8));
  const std::string bytes = slurp(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    spit(path, bytes.substr(0, keep));
    const std::string why = error_of(path);
    EXPECT_NE(why.find(path), std::string::npos) << "kept " << keep << " bytes: " << why;
    EXPECT_TRUE(why.find("truncated") != std::string::npos || why.find("CRC") != std::string::npos ||
                why.find("magic") != std::string::npos)
        << why;
  }
  fs::remove_all(dir);
}

TEST(CheckpointFile, FlippedByteIsACrcError) {
  const std::string dir = fresh_dir("corrupt");
  const std::string path = checkpoint_path(dir, 0, 8);
  write_checkpoint(path, sample(0, 8));
  std::string bytes = slurp(path);
  bytes[bytes.size() - 20] ^= 0x40;  // inside the float data
  spit(path, bytes);
  const std::string why = error_of(path);
  EXPECT_NE(why.find("CRC mismatch"), std::string::npos) << why;
  EXPECT_NE(why.find(path), std::string::npos) << why;
  spit(path, "PSHDCKPX" + bytes.substr(8));
  EXPECT_NE(error_of(path).find("bad magic"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of(dir + "/missing.ckpt").find("cannot open"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CheckpointFile, NewestCompleteStepNeedsEveryServerAndSkipsBadFiles) {
  const std::string dir = fresh_dir("newest");
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", nullptr), -1);
  for (int64_t step : {10, 20, 30}) write_checkpoint(checkpoint_path(dir, 0, step), sample(0, step));
  for (int64_t step : {10, 20}) write_checkpoint(checkpoint_path(dir, 1, step), sample(1, step));
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", nullptr), 20);  // server 1 has no step 30
  const std::string bad = checkpoint_path(dir, 1, 20);
  spit(bad, slurp(bad).substr(0, 100));
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", &skipped), 10);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(bad), std::string::npos) << skipped[0];
  // A file whose name does not match its header is not used either.
  fs::copy_file(checkpoint_path(dir, 0, 10), checkpoint_path(dir, 0, 40));
  fs::copy_file(checkpoint_path(dir, 1, 10), checkpoint_path(dir, 1, 40));
  skipped.clear();
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", &skipped), 10);
  EXPECT_FALSE(skipped.empty());
  fs::remove_all(dir);
}

// --resume must not hang on a FIFO, read /dev/zero until memory runs out, or fail without a file name
// on a directory: each is skipped, named, and the next complete step is used.
TEST(CheckpointFile, FifosDevicesAndDirectoriesAreSkippedNamingThemNotRead) {
  const std::string dir = fresh_dir("special");
  for (int64_t step : {10, 20, 30, 40}) {
    for (uint32_t s : {0u, 1u}) write_checkpoint(checkpoint_path(dir, s, step), sample(s, step));
  }
  const std::string fifo = checkpoint_path(dir, 1, 40), zero = checkpoint_path(dir, 1, 30),
                    folder = checkpoint_path(dir, 1, 20);
  for (const std::string& p : {fifo, zero, folder}) fs::remove(p);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", zero);
  fs::create_directory(folder);
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", &skipped), 10);
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[0], "checkpoint " + fifo + ": not a regular file (a FIFO): refusing to read it");
  EXPECT_EQ(skipped[1], "checkpoint " + zero + ": not a regular file (a character device): refusing to read it");
  EXPECT_EQ(skipped[2], "checkpoint " + folder + ": not a regular file (a directory): refusing to read it");
  EXPECT_EQ(error_of(fifo), skipped[0]);
  fs::remove_all(dir);
}

TEST(CheckpointFile, AServerWithoutSlicesNeedsNoFile) {
  const std::string dir = fresh_dir("noslices");
  // Tensors a (25 floats) and b (10) in 40-byte slices: 4 slices, so server 4 of 5 owns none.
  for (uint32_t s = 0; s < 4; ++s) {
    ServerCheckpoint c = sample(s, 7);
    c.num_servers = 5;
    SliceLayout layout(c.tensors, c.slice_bytes, 5);
    ASSERT_EQ(layout.bytes_on_server(4), 0u);
    c.layout_fingerprint = layout.fingerprint();
    c.slices.clear();
    for (uint32_t id = 0; id < layout.slices().size(); ++id) {
      if (layout.slice(id).server != s) continue;
      CheckpointSlice sl;
      sl.id = id;
      sl.version = 7;
      sl.weights.assign(layout.slice(id).length, 1.0f);
      sl.opt_state.assign(layout.slice(id).length, 0.0f);
      c.slices.push_back(sl);
    }
    write_checkpoint(checkpoint_path(dir, s, 7), c);
  }
  EXPECT_EQ(newest_complete_step(dir, 5, "run-a", nullptr), 7);
  fs::remove(checkpoint_path(dir, 3, 7));  // server 3 owns a slice: its file is needed
  EXPECT_EQ(newest_complete_step(dir, 5, "run-a", nullptr), -1);
  fs::remove_all(dir);
}

TEST(CheckpointFile, PruneKeepsTheNewest) {
  const std::string dir = fresh_dir("prune");
  for (int64_t step : {5, 10, 15, 20}) write_checkpoint(checkpoint_path(dir, 0, step), sample(0, step));
  write_checkpoint(checkpoint_path(dir, 1, 5), sample(1, 5));
  prune_checkpoints(dir, 0, 2, "run-a");
  EXPECT_EQ(checkpoint_steps(dir, 0), (std::vector<int64_t>{15, 20}));
  EXPECT_EQ(checkpoint_steps(dir, 1), (std::vector<int64_t>{5}));  // other servers' files are not touched
  prune_checkpoints(dir, 0, 0, "run-a");
  EXPECT_EQ(checkpoint_steps(dir, 0).size(), 2u);
  fs::remove_all(dir);
}

// The guarded case: run A (steps 500, 550, 600) left its files in the directory that run B (steps 50..300) uses.
TEST(CheckpointFile, NewestCompleteStepOnlySeesTheRunsOwnFiles) {
  const std::string dir = fresh_dir("other-run");
  for (int64_t step : {500, 550, 600}) {
    for (uint32_t s = 0; s < 2; ++s) write_checkpoint(checkpoint_path(dir, s, step), sample(s, step, "run-a"));
  }
  for (int64_t step : {250, 300}) {
    for (uint32_t s = 0; s < 2; ++s) write_checkpoint(checkpoint_path(dir, s, step), sample(s, step, "run-b"));
  }
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_complete_step(dir, 2, "run-b", &skipped), 300);
  ASSERT_FALSE(skipped.empty());
  EXPECT_NE(skipped[0].find(checkpoint_path(dir, 0, 600) + ": belongs to run run-a, not to this run run-b"),
            std::string::npos)
      << skipped[0];
  EXPECT_EQ(newest_complete_step(dir, 2, "run-a", nullptr), 600);
  EXPECT_EQ(newest_complete_step(dir, 2, "run-c", nullptr), -1);
  fs::remove_all(dir);
}

TEST(CheckpointFile, PruneOnlyCountsAndDeletesTheRunsOwnFiles) {
  const std::string dir = fresh_dir("prune-runs");
  for (int64_t step : {500, 550, 600}) write_checkpoint(checkpoint_path(dir, 0, step), sample(0, step, "run-a"));
  spit(checkpoint_path(dir, 0, 700), "not a checkpoint");
  for (int64_t step : {50, 100, 150, 200}) {
    write_checkpoint(checkpoint_path(dir, 0, step), sample(0, step, "run-b"));
    prune_checkpoints(dir, 0, 3, "run-b");
  }
  // Run B keeps its three newest; run A's files and the unreadable one are not B's to count or delete.
  EXPECT_EQ(checkpoint_steps(dir, 0), (std::vector<int64_t>{100, 150, 200, 500, 550, 600, 700}));
  fs::remove_all(dir);
}

// A file of format version 1 (before run ids) is a clear error, never read as this run's.
TEST(CheckpointFile, AFileWithoutARunIdIsAClearError) {
  const std::string dir = fresh_dir("version1");
  const std::string path = checkpoint_path(dir, 0, 10);
  write_checkpoint(path, sample(0, 10));
  std::string bytes = slurp(path);
  bytes[8] = 1;  // the format version, little-endian u32 after the magic
  spit(path, bytes);
  EXPECT_NE(error_of(path).find("format version 1, this build reads versions 2 to 4"), std::string::npos)
      << error_of(path);
  try {
    read_checkpoint_run_id(path);
    ADD_FAILURE() << "read_checkpoint_run_id accepted a version 1 file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": format version 1"), std::string::npos) << e.what();
  }
  std::vector<std::string> skipped;
  EXPECT_EQ(newest_complete_step(dir, 1, "run-a", &skipped), -1);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("format version 1"), std::string::npos) << skipped[0];
  prune_checkpoints(dir, 0, 1, "run-a");
  EXPECT_TRUE(fs::exists(path));  // never deleted
  fs::remove_all(dir);
}

// A worker's residual file: read back as written; a flipped byte, a truncated file and a foreign file are errors
// naming the file; pruning keeps the newest `keep` of that worker only.
TEST(ResidualFile, RoundTripsAndRefusesDamage) {
  const std::string dir = fresh_dir("residuals");
  WorkerResiduals r;
  r.rank = 1;
  r.step = 40;
  r.layout_fingerprint = 0xfeedull;
  r.slices = {{0, {0.5f, -1.25f, 3.0f}, ""}, {7, {}, "1 2 3"}};
  const std::string path = residual_file_path(dir, 1, 40);
  EXPECT_EQ(path, dir + "/worker-1.step-00000040.residuals");
  write_residual_file(path, r);
  const WorkerResiduals back = read_residual_file(path);
  EXPECT_EQ(back.rank, 1u);
  EXPECT_EQ(back.step, 40);
  EXPECT_EQ(back.layout_fingerprint, 0xfeedull);
  ASSERT_EQ(back.slices.size(), 2u);
  EXPECT_EQ(back.slices[0].residual, r.slices[0].residual);
  EXPECT_EQ(back.slices[1].slice, 7u);
  EXPECT_EQ(back.slices[1].codec_state, "1 2 3");

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto expect_error = [&](const std::string& content, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    try {
      read_residual_file(path);
      ADD_FAILURE() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("residual file " + path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  std::string flipped = bytes;
  flipped[30] = static_cast<char>(flipped[30] ^ 0x40);
  expect_error(flipped, "CRC-32 mismatch");
  expect_error(bytes.substr(0, bytes.size() / 2), "CRC-32 mismatch");
  expect_error("", "too short");

  for (int64_t step : {20, 60, 80}) write_residual_file(residual_file_path(dir, 1, step), r);
  write_residual_file(residual_file_path(dir, 0, 20), r);
  prune_residual_files(dir, 1, 2);
  EXPECT_FALSE(fs::exists(residual_file_path(dir, 1, 20)));
  EXPECT_FALSE(fs::exists(residual_file_path(dir, 1, 40)));
  EXPECT_TRUE(fs::exists(residual_file_path(dir, 1, 60)));
  EXPECT_TRUE(fs::exists(residual_file_path(dir, 1, 80)));
  EXPECT_TRUE(fs::exists(residual_file_path(dir, 0, 20))) << "another worker's file was pruned";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pshard
