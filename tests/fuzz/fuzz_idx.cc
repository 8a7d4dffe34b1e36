// libFuzzer target: the IDX reader (plain and gzip) used for MNIST / Fashion-MNIST.
//
// Input: byte 0 = flags (bit 0: gzip-compress the rest before writing it, so that the parser
// behind a valid gzip stream is explored too; bits 1-2: expected ndims 0..3; bits 3-4:
// max_items 0, 1, 2 or 1000), then the file's bytes. read_idx must return an array whose
// dims match its data or throw a pshard::Error naming the file.
#include <zlib.h>

#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/data/idx.h"

using namespace pshard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  const std::string bytes = in.rest();
  const std::string& path = fuzz::scratch_path("idx");
  if (flags & 1) {
    gzFile f = gzopen(path.c_str(), "wb");
    PSHARD_FUZZ_REQUIRE(f != nullptr);
    PSHARD_FUZZ_REQUIRE(bytes.empty() || gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) > 0);
    PSHARD_FUZZ_REQUIRE(gzclose(f) == Z_OK);
  } else {
    fuzz::write_file(path, bytes);
  }
  const int expected_ndims = (flags >> 1) & 3;
  const int64_t max_items_choice[] = {0, 1, 2, 1000};
  const int64_t max_items = max_items_choice[(flags >> 3) & 3];
  try {
    data::IdxArray a = data::read_idx(path, expected_ndims, max_items);
    int64_t total = 1;
    for (int64_t d : a.dims) total *= d;
    PSHARD_FUZZ_REQUIRE(!a.dims.empty());
    PSHARD_FUZZ_REQUIRE(expected_ndims == 0 || a.dims.size() == static_cast<size_t>(expected_ndims));
    PSHARD_FUZZ_REQUIRE(max_items == 0 || a.dims[0] <= max_items);
    PSHARD_FUZZ_REQUIRE(static_cast<size_t>(total) == a.data.size());
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(std::string(e.what()).find(path) != std::string::npos);
  }
  return 0;
}
