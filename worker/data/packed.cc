// Packed record files: writer, checked reader, header info.
#include "worker/data/packed.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/util/binary_file.h"

namespace pshard::data {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed files are little-endian; this host is not");

constexpr uint64_t kFixedHeader = 128;
constexpr uint32_t kMaxDims = 8;

uint64_t align64(uint64_t x) { return (x + 63) / 64 * 64; }

template <typename T>
void put(std::string* buf, size_t off, T v) {
  std::memcpy(&(*buf)[off], &v, sizeof v);
}
template <typename T>
T get(const std::string& buf, size_t off) {
  T v;
  std::memcpy(&v, buf.data() + off, sizeof v);
  return v;
}

uint32_t crc_of(const void* p, uint64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const Bytef* b = static_cast<const Bytef*>(p);
  while (n > 0) {
    uInt chunk = static_cast<uInt>(std::min<uint64_t>(n, 1u << 30));
    crc = crc32(crc, b, chunk);
    b += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

// Section layout computed from the counts: the only layout a valid file has.
struct Layout {
  uint64_t header_bytes, features_offset, features_bytes, labels_offset, labels_bytes, targets_offset, targets_bytes,
      file_bytes;
};

Layout layout_for(int64_t count, int64_t elems, int64_t num_classes, int64_t target_dim, uint64_t ndims,
                  uint64_t name_bytes) {
  Layout l{};
  l.header_bytes = align64(kFixedHeader + 8 * ndims + name_bytes);
  l.features_offset = l.header_bytes;
  l.features_bytes = 4ull * static_cast<uint64_t>(count) * static_cast<uint64_t>(elems);
  uint64_t end = align64(l.features_offset + l.features_bytes);
  if (num_classes > 0) {
    l.labels_offset = end;
    l.labels_bytes = 4ull * static_cast<uint64_t>(count);
    end = align64(l.labels_offset + l.labels_bytes);
  }
  if (target_dim > 0) {
    l.targets_offset = end;
    l.targets_bytes = 4ull * static_cast<uint64_t>(count) * static_cast<uint64_t>(target_dim);
    end = align64(l.targets_offset + l.targets_bytes);
  }
  l.file_bytes = end;
  return l;
}

struct Header {
  PackedInfo info;
  Layout layout;
  uint32_t features_crc, labels_crc, targets_crc;
};

std::string at(const std::string& path, uint64_t off) { return path + ": byte " + std::to_string(off) + ": "; }

void read_at(std::ifstream& in, const std::string& path, uint64_t off, void* dst, uint64_t n, const char* what) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(off));
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  uint64_t got = in ? n : static_cast<uint64_t>(in.gcount());
  if (got != n) {
    throw Error(path + ": truncated at byte " + std::to_string(off + got) + ": expected " + std::to_string(n) +
                " bytes of " + what + " starting at byte " + std::to_string(off));
  }
}

Header read_header(std::ifstream& in, const std::string& path) {
  std::string fixed(kFixedHeader, '\0');
  read_at(in, path, 0, &fixed[0], kFixedHeader, "packed header");
  if (std::memcmp(fixed.data(), kPackedMagic, 8) != 0) {
    throw Error(at(path, 0) + "bad magic: expected \"PSHDPACK\" (not a pshard packed file)");
  }
  uint32_t version = get<uint32_t>(fixed, 8);
  if (version != kPackedVersion) {
    throw Error(at(path, 8) + "unsupported packed format version " + std::to_string(version) + " (this build reads " +
                std::to_string(kPackedVersion) + ")");
  }
  Header h{};
  uint32_t header_bytes = get<uint32_t>(fixed, 12);
  h.info.count = get<int64_t>(fixed, 16);
  h.info.num_classes = get<int64_t>(fixed, 24);
  h.info.target_dim = get<int64_t>(fixed, 32);
  uint32_t ndims = get<uint32_t>(fixed, 40);
  uint32_t name_bytes = get<uint32_t>(fixed, 44);
  if (h.info.count < 0 || h.info.count > (int64_t(1) << 40)) {
    throw Error(at(path, 16) + "sample count " + std::to_string(h.info.count) + " is out of range");
  }
  if (h.info.num_classes < 0 || h.info.num_classes > (int64_t(1) << 31)) {
    throw Error(at(path, 24) + "num_classes " + std::to_string(h.info.num_classes) + " is out of range");
  }
  if (h.info.target_dim < 0 || h.info.target_dim > (int64_t(1) << 31)) {
    throw Error(at(path, 32) + "target_dim " + std::to_string(h.info.target_dim) + " is out of range");
  }
  if (ndims < 1 || ndims > kMaxDims) {
    throw Error(at(path, 40) + "sample ndims " + std::to_string(ndims) + " is not in 1.." + std::to_string(kMaxDims));
  }
  if (name_bytes > 4096) throw Error(at(path, 44) + "name length " + std::to_string(name_bytes) + " exceeds 4096");
  if (header_bytes != align64(kFixedHeader + 8ull * ndims + name_bytes)) {
    throw Error(at(path, 12) + "header_bytes " + std::to_string(header_bytes) + " disagrees with ndims " +
                std::to_string(ndims) + " and name length " + std::to_string(name_bytes));
  }
  std::string header(header_bytes, '\0');
  read_at(in, path, 0, &header[0], header_bytes, "packed header");
  uint32_t stored_header_crc = get<uint32_t>(header, 92);
  put<uint32_t>(&header, 92, 0);
  if (crc_of(header.data(), header.size()) != stored_header_crc) {
    throw Error(at(path, 0) + "header checksum mismatch over bytes [0, " + std::to_string(header_bytes) +
                ") (corrupt header)");
  }
  int64_t elems = 1;
  for (uint32_t d = 0; d < ndims; ++d) {
    int64_t v = get<int64_t>(header, kFixedHeader + 8 * d);
    if (v < 1 || v > (int64_t(1) << 32) || elems > (int64_t(1) << 40) / v) {
      throw Error(at(path, kFixedHeader + 8 * d) + "sample dimension " + std::to_string(d) + " = " + std::to_string(v) +
                  " is out of range");
    }
    elems *= v;
    h.info.sample_shape.push_back(v);
  }
  // Bounds the section sizes, so that layout_for() cannot wrap around 2^64 (a wrapped size would
  // pass the file-size check and leave a data set claiming 2^31 samples with no features).
  constexpr int64_t kMaxValues = int64_t(1) << 40;
  if (h.info.count > 0 && (elems > kMaxValues / h.info.count || h.info.target_dim > kMaxValues / h.info.count)) {
    throw Error(at(path, 16) + "sample count " + std::to_string(h.info.count) + " times " + std::to_string(elems) +
                " values per sample (target_dim " + std::to_string(h.info.target_dim) + ") exceeds 2^40 values");
  }
  h.info.name = header.substr(kFixedHeader + 8 * ndims, name_bytes);
  h.layout = layout_for(h.info.count, elems, h.info.num_classes, h.info.target_dim, ndims, name_bytes);
  struct {
    size_t off;
    uint64_t want;
    const char* name;
  } checks[] = {{48, h.layout.features_offset, "features_offset"},
                {56, h.layout.labels_offset, "labels_offset"},
                {64, h.layout.targets_offset, "targets_offset"},
                {72, h.layout.file_bytes, "file_bytes"}};
  for (const auto& c : checks) {
    uint64_t v = get<uint64_t>(header, c.off);
    if (v != c.want) {
      throw Error(at(path, c.off) + c.name + " is " + std::to_string(v) + ", but the counts and shape give " +
                  std::to_string(c.want));
    }
  }
  h.info.file_bytes = h.layout.file_bytes;
  h.features_crc = get<uint32_t>(header, 80);
  h.labels_crc = get<uint32_t>(header, 84);
  h.targets_crc = get<uint32_t>(header, 88);
  in.clear();
  in.seekg(0, std::ios::end);
  uint64_t actual = static_cast<uint64_t>(in.tellg());
  if (actual < h.layout.file_bytes) {
    throw Error(path + ": truncated at byte " + std::to_string(actual) + ": the header at byte 72 announces " +
                std::to_string(h.layout.file_bytes) + " bytes (" + std::to_string(h.info.count) + " samples)");
  }
  if (actual > h.layout.file_bytes) {
    throw Error(path + ": unexpected bytes after byte " + std::to_string(h.layout.file_bytes) + " (file has " +
                std::to_string(actual) + " bytes)");
  }
  return h;
}

void check_crc(const std::string& path, const void* p, uint64_t n, uint64_t off, uint32_t want, const char* what) {
  if (crc_of(p, n) != want) {
    throw Error(path + ": checksum mismatch in the " + what + " section at bytes [" + std::to_string(off) + ", " +
                std::to_string(off + n) + ") (corrupt file)");
  }
}

}  // namespace

void write_packed(const std::string& path, const Dataset& data) {
  data.check_consistent(path);
  uint64_t ndims = data.sample_shape.size();
  if (ndims < 1 || ndims > kMaxDims)
    throw Error(path + ": a sample must have 1.." + std::to_string(kMaxDims) + " dims");
  Layout l = layout_for(data.size(), data.sample_elems(), data.num_classes, data.target_dim, ndims, data.name.size());
  std::string header(l.header_bytes, '\0');
  std::memcpy(&header[0], kPackedMagic, 8);
  put<uint32_t>(&header, 8, kPackedVersion);
  put<uint32_t>(&header, 12, static_cast<uint32_t>(l.header_bytes));
  put<int64_t>(&header, 16, data.size());
  put<int64_t>(&header, 24, data.num_classes);
  put<int64_t>(&header, 32, data.target_dim);
  put<uint32_t>(&header, 40, static_cast<uint32_t>(ndims));
  put<uint32_t>(&header, 44, static_cast<uint32_t>(data.name.size()));
  put<uint64_t>(&header, 48, l.features_offset);
  put<uint64_t>(&header, 56, l.labels_offset);
  put<uint64_t>(&header, 64, l.targets_offset);
  put<uint64_t>(&header, 72, l.file_bytes);
  put<uint32_t>(&header, 80, crc_of(data.features.data(), l.features_bytes));
  put<uint32_t>(&header, 84, l.labels_bytes ? crc_of(data.labels.data(), l.labels_bytes) : 0);
  put<uint32_t>(&header, 88, l.targets_bytes ? crc_of(data.targets.data(), l.targets_bytes) : 0);
  for (uint64_t d = 0; d < ndims; ++d) put<int64_t>(&header, kFixedHeader + 8 * d, data.sample_shape[d]);
  std::memcpy(&header[kFixedHeader + 8 * ndims], data.name.data(), data.name.size());
  put<uint32_t>(&header, 92, crc_of(header.data(), header.size()));

  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp + ": cannot create: " + std::strerror(errno));
    const char zeros[64] = {};
    auto section = [&](uint64_t off, const void* p, uint64_t n) {
      uint64_t pos = static_cast<uint64_t>(out.tellp());
      out.write(zeros, static_cast<std::streamsize>(off - pos));
      out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    };
    section(0, header.data(), header.size());
    section(l.features_offset, data.features.data(), l.features_bytes);
    if (l.labels_bytes) section(l.labels_offset, data.labels.data(), l.labels_bytes);
    if (l.targets_bytes) section(l.targets_offset, data.targets.data(), l.targets_bytes);
    uint64_t pos = static_cast<uint64_t>(out.tellp());
    out.write(zeros, static_cast<std::streamsize>(l.file_bytes - pos));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      throw Error(tmp + ": write failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " into place: " + why);
  }
}

PackedInfo read_packed_info(const std::string& path) {
  binary::require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  return read_header(in, path).info;
}

Dataset read_packed(const std::string& path, int64_t max_samples) {
  binary::require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  Header h = read_header(in, path);
  int64_t n = h.info.count;
  bool limited = max_samples > 0 && max_samples < n;
  if (limited) n = max_samples;
  Dataset d;
  d.name = h.info.name;
  d.sample_shape = h.info.sample_shape;
  d.num_classes = h.info.num_classes;
  d.target_dim = h.info.target_dim;
  int64_t elems = d.sample_elems();
  d.features.resize(static_cast<size_t>(n * elems));
  read_at(in, path, h.layout.features_offset, d.features.data(), d.features.size() * 4, "features");
  if (!limited)
    check_crc(path, d.features.data(), h.layout.features_bytes, h.layout.features_offset, h.features_crc, "features");
  if (d.num_classes > 0) {
    d.labels.resize(static_cast<size_t>(n));
    read_at(in, path, h.layout.labels_offset, d.labels.data(), d.labels.size() * 4, "labels");
    if (!limited)
      check_crc(path, d.labels.data(), h.layout.labels_bytes, h.layout.labels_offset, h.labels_crc, "labels");
    for (int64_t i = 0; i < n; ++i) {
      int32_t y = d.labels[static_cast<size_t>(i)];
      if (y < 0 || y >= d.num_classes) {
        throw Error(at(path, h.layout.labels_offset + 4 * static_cast<uint64_t>(i)) + "label " + std::to_string(y) +
                    " of sample " + std::to_string(i) + " is not a class 0.." + std::to_string(d.num_classes - 1));
      }
    }
  }
  if (d.target_dim > 0) {
    d.targets.resize(static_cast<size_t>(n * d.target_dim));
    read_at(in, path, h.layout.targets_offset, d.targets.data(), d.targets.size() * 4, "targets");
    if (!limited)
      check_crc(path, d.targets.data(), h.layout.targets_bytes, h.layout.targets_offset, h.targets_crc, "targets");
  }
  return d;
}

}  // namespace pshard::data
