// binary::Reader bounds checks and error text; write_file_atomically replaces a file whole.
#include "common/util/binary_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "common/error.h"
#include "tests/support/error_of.h"

namespace {

using namespace pshard;

using pshard::testing::error_of;

TEST(BinaryFile, RoundTripsValuesStringsAndFloats) {
  std::string out;
  binary::put<uint32_t>(out, 7);
  binary::put<int64_t>(out, -3);
  binary::put_string(out, "fc1.weight");
  const float f[3] = {1.5f, -2.0f, 0.25f};
  binary::put_floats(out, f, 3);
  binary::Reader r("test file", out);
  EXPECT_EQ(r.get<uint32_t>("a"), 7u);
  EXPECT_EQ(r.get<int64_t>("b"), -3);
  EXPECT_EQ(r.get_string("name", 64), "fc1.weight");
  std::vector<float> v;
  r.get_floats(&v, 3, "floats");
  EXPECT_EQ(v, std::vector<float>(f, f + 3));
  EXPECT_TRUE(r.at_end());
}

TEST(BinaryFile, TruncationAndHugeCountsAreErrorsWithTheOffsetNotAllocations) {
  std::string out;
  binary::put<uint32_t>(out, 1);
  binary::Reader r("model file /x/model.bin", out);
  r.get<uint32_t>("version");
  EXPECT_EQ(error_of([&] { r.get<uint64_t>("numel"); }),
            "model file /x/model.bin: truncated: numel needs 8 more bytes, the file has 0 left (at byte offset 4)");
  std::vector<float> v;
  const std::string e = error_of([&] { r.get_floats(&v, std::numeric_limits<uint64_t>::max() / 8, "tensor data"); });
  EXPECT_NE(e.find("truncated: tensor data"), std::string::npos) << e;
  EXPECT_TRUE(v.empty());
  std::string s;
  binary::put<uint32_t>(s, 1u << 30);
  binary::Reader r2("f", s);
  EXPECT_EQ(error_of([&] { r2.get_string("a tensor name", 4096); }),
            "f: a tensor name claims 1073741824 bytes (at byte offset 4)");
}

TEST(BinaryFile, WriteFileAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  const std::string dir = "/tmp/pshard_binary_file_test_" + std::to_string(::getpid()) + "/sub";
  const std::string path = dir + "/data.bin";
  binary::write_file_atomically(path, "first", "test file");  // creates the directory
  binary::write_file_atomically(path, "second version", "test file");
  EXPECT_EQ(binary::read_file(path, "test file"), "second version");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "data.bin") << "left behind: " << entry.path();
  }
  const std::string e = error_of([&] { binary::read_file(dir + "/missing.bin", "test file"); });
  EXPECT_NE(e.find("test file " + dir + "/missing.bin: cannot open"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { binary::write_file_atomically("/proc/pshard_no/x.bin", "x", "test file"); }), "");
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST(BinaryFile, CreateFileAtomicallyNeverReplacesAndHonoursTheMode) {
  const std::string dir = "/tmp/pshard_binary_file_create_" + std::to_string(::getpid());
  const std::string path = dir + "/secret";
  EXPECT_TRUE(binary::create_file_atomically(path, "mine", "secret file", 0600));
  EXPECT_FALSE(binary::create_file_atomically(path, "theirs", "secret file", 0600));  // exists: left alone
  EXPECT_EQ(binary::read_file(path, "secret file"), "mine");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "secret") << "left behind: " << entry.path();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
