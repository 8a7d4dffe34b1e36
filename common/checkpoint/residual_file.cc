// Worker residual files: magic, version, rank, step, layout fingerprint, slices, CRC-32.
#include "common/checkpoint/residual_file.h"

#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>

#include "common/util/binary_file.h"

namespace pshard {
namespace {

constexpr uint64_t kMagic = 0x3144495345525350ull;  // "PSRESID1"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxCodecState = 1 << 20;

uint32_t crc_of(const std::string& bytes, size_t n) {
  return static_cast<uint32_t>(::crc32_z(0L, reinterpret_cast<const Bytef*>(bytes.data()), n));
}

}  // namespace

std::string residual_file_path(const std::string& checkpoint_dir, uint32_t rank, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "worker-%u.step-%08" PRId64 ".residuals", rank, step);
  return checkpoint_dir + "/" + name;
}

void write_residual_file(const std::string& path, const WorkerResiduals& r) {
  std::string out;
  binary::put(out, kMagic);
  binary::put(out, kVersion);
  binary::put(out, r.rank);
  binary::put(out, r.step);
  binary::put(out, r.layout_fingerprint);
  binary::put(out, static_cast<uint32_t>(r.slices.size()));
  for (const ResidualSlice& s : r.slices) {
    binary::put(out, s.slice);
    binary::put(out, static_cast<uint64_t>(s.residual.size()));
    binary::put_floats(out, s.residual.data(), s.residual.size());
    binary::put_string(out, s.codec_state);
  }
  binary::put(out, crc_of(out, out.size()));
  binary::write_file_atomically(path, out, "residual file");
}

WorkerResiduals read_residual_file(const std::string& path) {
  binary::Reader in("residual file " + path, binary::read_file(path, "residual file"));
  if (in.size() < sizeof(uint32_t)) in.fail("too short for a residual file");
  uint32_t stored = 0;
  std::memcpy(&stored, in.bytes().data() + in.size() - sizeof stored, sizeof stored);
  if (crc_of(in.bytes(), in.size() - sizeof stored) != stored) in.fail("CRC-32 mismatch: the file is corrupt");
  if (in.get<uint64_t>("magic") != kMagic) in.fail("not a pshard residual file (bad magic)");
  const uint32_t version = in.get<uint32_t>("version");
  if (version != kVersion) in.fail("format version " + std::to_string(version) + ", this build reads 1");
  WorkerResiduals r;
  r.rank = in.get<uint32_t>("rank");
  r.step = in.get<int64_t>("step");
  r.layout_fingerprint = in.get<uint64_t>("layout fingerprint");
  const uint32_t count = in.get<uint32_t>("slice count");
  for (uint32_t i = 0; i < count; ++i) {
    ResidualSlice s;
    s.slice = in.get<uint32_t>("slice id");
    const uint64_t n = in.get<uint64_t>("slice length");
    in.get_floats(&s.residual, n, "residual");
    s.codec_state = in.get_string("codec state", kMaxCodecState);
    r.slices.push_back(std::move(s));
  }
  if (in.pos() + sizeof stored != in.size()) in.fail("bytes left after the last slice");
  return r;
}

void prune_residual_files(const std::string& checkpoint_dir, uint32_t rank, int64_t keep) {
  if (keep <= 0) return;
  const std::string prefix = "worker-" + std::to_string(rank) + ".step-";
  std::vector<std::filesystem::path> mine;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(checkpoint_dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string suffix = ".residuals";
    if (name.rfind(prefix, 0) == 0 && name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      mine.push_back(e.path());
    }
  }
  std::sort(mine.begin(), mine.end());  // zero-padded steps: names sort by step
  for (size_t i = 0; i + static_cast<size_t>(keep) < mine.size(); ++i) std::filesystem::remove(mine[i], ec);
}

}  // namespace pshard
