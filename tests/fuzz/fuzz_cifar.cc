// libFuzzer target: the CIFAR-10 binary reader (load_cifar10_split on a test_batch.bin).
//
// Input: byte 0 = flags (bits 0-1: max_samples 0, 1, 2 or 5; bit 2: normalize), then the
// bytes of test_batch.bin. Loading must give a consistent data set or a pshard::Error naming
// the file.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/data/cifar10.h"

using namespace pshard;

namespace {

// A directory holding only test_batch.bin, removed when the process exits.
const std::string& cifar_dir() {
  static const std::string dir = [] {
    std::string d = fuzz::scratch_path("cifar") + ".d";
    mkdir(d.c_str(), 0700);
    return d;
  }();
  static const bool registered = [] {
    return std::atexit([] {
             std::remove((dir + "/test_batch.bin").c_str());
             rmdir(dir.c_str());
           }) == 0;
  }();
  (void)registered;
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  const std::string& dir = cifar_dir();
  const std::string file = dir + "/test_batch.bin";
  fuzz::write_file(file, in.rest());
  const int64_t max_samples_choice[] = {0, 1, 2, 5};
  const int64_t max_samples = max_samples_choice[flags & 3];
  data::Dataset d;
  try {
    d = data::load_cifar10_split(dir, "test", max_samples, (flags & 4) != 0);
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(std::string(e.what()).find(file) != std::string::npos);
    return 0;
  }
  PSHARD_FUZZ_REQUIRE(d.size() > 0);
  PSHARD_FUZZ_REQUIRE(max_samples == 0 || d.size() <= max_samples);
  PSHARD_FUZZ_REQUIRE(d.features.size() == static_cast<size_t>(d.size()) * 3 * 32 * 32);
  for (int32_t y : d.labels) PSHARD_FUZZ_REQUIRE(y >= 0 && y < 10);
  return 0;
}
