// read_private_file: what a join file or key file must be before its content is acted on.
#include "common/util/private_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"

namespace pshard {
namespace {

namespace fs = std::filesystem;

class PrivateFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pshard-private-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text, unsigned mode) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::string error_of(const std::string& path) {
    try {
      read_private_file(path, "join file", 1 << 20);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string dir_;
};

TEST_F(PrivateFile, ReadsAFileOnlyItsOwnerCanTouch) {
  EXPECT_EQ(read_private_file(write("ok.json", "{\"argv\": []}\n", 0600), "join file", 1 << 20), "{\"argv\": []}\n");
  EXPECT_EQ(read_private_file(write("ro.json", "x", 0400), "join file", 1 << 20), "x");
}

TEST_F(PrivateFile, RefusesWhatGroupOrOthersMayReadOrWrite) {
  for (unsigned mode : {0666u, 0620u, 0602u, 0644u, 0640u}) {
    const std::string path = write("open.json", "{}", mode);
    const std::string why = error_of(path);
    EXPECT_NE(why.find("join file " + path + " has mode " + mode_string(mode)), std::string::npos) << why;
    EXPECT_NE(why.find("refusing to use it"), std::string::npos) << why;
  }
}

TEST_F(PrivateFile, RefusesAFileOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string path = write("theirs.json", "{}", 0600);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  const std::string why = error_of(path);
  EXPECT_NE(why.find("is owned by uid 65534, not by this user (uid 0)"), std::string::npos) << why;
}

TEST_F(PrivateFile, RefusesADirectoryOthersCanWrite) {
  const std::string path = write("in-open-dir.json", "{}", 0600);
  ::chmod(dir_.c_str(), 0777);
  const std::string why = error_of(path);
  EXPECT_NE(why.find("its directory " + dir_ + " has mode 0777"), std::string::npos) << why;
}

TEST_F(PrivateFile, RefusesLinksFifosAndMissingFilesWithoutWaiting) {
  const std::string target = write("target.json", "{}", 0600);
  const std::string link = dir_ + "/link.json";
  fs::create_symlink(target, link);
  EXPECT_NE(error_of(link).find("is a symbolic link"), std::string::npos) << error_of(link);
  const std::string fifo = dir_ + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of(fifo).find("is not a regular file"), std::string::npos) << error_of(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // opening it did not wait for a writer
  EXPECT_NE(error_of(dir_ + "/none.json").find("No such file"), std::string::npos);
}

TEST_F(PrivateFile, RefusesAFileLargerThanItsLimit) {
  const std::string path = write("big.json", std::string(2000, 'x'), 0600);
  try {
    read_private_file(path, "join file", 1000);
    FAIL() << "read a file over its limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2000 bytes, more than the 1000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pshard
