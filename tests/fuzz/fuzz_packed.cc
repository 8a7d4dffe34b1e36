// libFuzzer target: the packed record file reader (read_packed, read_packed_info).
//
// Input: byte 0 = flags (bit 0: recompute the header checksum, bit 1: recompute the section
// checksums, so that mutations reach the checks behind them; bits 2-3: max_samples 0, 1, 2
// or 7), then the file's bytes. Reading must give a consistent data set or a pshard::Error
// naming the file.
#include <zlib.h>

#include <cstring>
#include <string>

#include "common/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/data/packed.h"

using namespace pshard;

namespace {

template <typename T>
T get(const std::string& b, size_t off) {
  T v{};
  if (off + sizeof v <= b.size()) std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <typename T>
void put(std::string* b, size_t off, T v) {
  if (off + sizeof v <= b->size()) std::memcpy(&(*b)[off], &v, sizeof v);
}

uint32_t crc_of(const std::string& b, uint64_t off, uint64_t n) {
  if (off > b.size() || n > b.size() - off) return 0;
  return static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data() + off), static_cast<uInt>(n)));
}

// Rewrites the checksums a writer would have stored for the sections the header points at.
void fix_section_crcs(std::string* b) {
  const uint32_t ndims = get<uint32_t>(*b, 40);
  if (ndims < 1 || ndims > 8) return;
  const int64_t count = get<int64_t>(*b, 16), target_dim = get<int64_t>(*b, 32);
  uint64_t elems = 1;
  for (uint32_t d = 0; d < ndims; ++d) {
    const int64_t v = get<int64_t>(*b, 128 + 8 * d);
    if (v < 1 || __builtin_mul_overflow(elems, static_cast<uint64_t>(v), &elems)) return;
  }
  uint64_t features = 0, targets = 0;
  if (count < 0 || target_dim < 0) return;
  if (__builtin_mul_overflow(4 * elems, static_cast<uint64_t>(count), &features)) return;
  if (__builtin_mul_overflow(4 * static_cast<uint64_t>(target_dim), static_cast<uint64_t>(count), &targets)) return;
  put<uint32_t>(b, 80, crc_of(*b, get<uint64_t>(*b, 48), features));
  put<uint32_t>(b, 84, crc_of(*b, get<uint64_t>(*b, 56), 4 * static_cast<uint64_t>(count)));
  put<uint32_t>(b, 88, crc_of(*b, get<uint64_t>(*b, 64), targets));
}

void fix_header_crc(std::string* b) {
  const uint32_t header_bytes = get<uint32_t>(*b, 12);
  if (header_bytes < 96 || header_bytes > b->size()) return;
  put<uint32_t>(b, 92, 0);
  put<uint32_t>(b, 92, crc_of(*b, 0, header_bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  std::string bytes = in.rest();
  if (flags & 2) fix_section_crcs(&bytes);
  if (flags & 1) fix_header_crc(&bytes);
  const std::string& path = fuzz::scratch_path("packed");
  fuzz::write_file(path, bytes);
  const int64_t max_samples_choice[] = {0, 1, 2, 7};
  const int64_t max_samples = max_samples_choice[(flags >> 2) & 3];

  data::PackedInfo info;
  try {
    info = data::read_packed_info(path);
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(std::string(e.what()).find(path) != std::string::npos);
  }
  data::Dataset d;
  try {
    d = data::read_packed(path, max_samples);
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(std::string(e.what()).find(path) != std::string::npos);
    return 0;
  }
  PSHARD_FUZZ_REQUIRE(info.sample_shape == d.sample_shape);
  PSHARD_FUZZ_REQUIRE(max_samples == 0 || d.size() <= max_samples);
  PSHARD_FUZZ_REQUIRE(info.file_bytes == bytes.size());
  try {
    d.check_consistent(path);
  } catch (const Error& e) {
    std::fprintf(stderr, "read_packed returned an inconsistent data set: %s\n", e.what());
    PSHARD_FUZZ_REQUIRE(!"read_packed result is consistent");
  }
  for (int32_t y : d.labels) PSHARD_FUZZ_REQUIRE(y >= 0 && y < d.num_classes);
  return 0;
}
