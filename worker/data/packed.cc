// Packed record files: writer, checked reader, header info.
#include "worker/data/packed.h"

#include <fcntl.h>
#include <unistd.h>
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

// Version 2 (encoded images): encoded bytes, then labels, then the index.
Layout image_layout_for(int64_t count, uint64_t encoded_bytes, uint64_t ndims, uint64_t name_bytes) {
  Layout l{};
  l.header_bytes = align64(kFixedHeader + 8 * ndims + name_bytes);
  l.features_offset = l.header_bytes;
  l.features_bytes = encoded_bytes;
  l.labels_offset = align64(l.features_offset + l.features_bytes);
  l.labels_bytes = 4ull * static_cast<uint64_t>(count);
  l.targets_offset = align64(l.labels_offset + l.labels_bytes);
  l.targets_bytes = kPackedIndexEntry * static_cast<uint64_t>(count);
  l.file_bytes = align64(l.targets_offset + l.targets_bytes);
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
  if (version != kPackedVersion && version != kPackedImagesVersion) {
    throw Error(at(path, 8) + "unsupported packed format version " + std::to_string(version) + " (this build reads " +
                std::to_string(kPackedVersion) + " and " + std::to_string(kPackedImagesVersion) + ")");
  }
  Header h{};
  h.info.encoded_images = version == kPackedImagesVersion;
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
  if (h.info.encoded_images) {
    uint64_t encoded_bytes = get<uint64_t>(header, 96);
    if (h.info.num_classes < 1 || h.info.target_dim != 0 || encoded_bytes > (uint64_t(1) << 50)) {
      throw Error(at(path, 24) + "an encoded-image file needs num_classes >= 1, target_dim 0 and at most 2^50 " +
                  "encoded bytes (has " + std::to_string(h.info.num_classes) + ", " +
                  std::to_string(h.info.target_dim) + ", " + std::to_string(encoded_bytes) + ")");
    }
    h.layout = image_layout_for(h.info.count, encoded_bytes, ndims, name_bytes);
  } else {
    h.layout = layout_for(h.info.count, elems, h.info.num_classes, h.info.target_dim, ndims, name_bytes);
  }
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
  if (data.source) {
    throw Error(path + ": data set '" + data.name +
                "' is decoded batch by batch, not held as float samples: pack an "
                "image folder with `pshard data pack`");
  }
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
  if (h.info.encoded_images) {
    throw Error(path +
                ": holds encoded images (written by `pshard data pack`), not float samples: read it with "
                "PackedImages");
  }
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

namespace pshard::data {

void write_packed_images(const std::string& path, const EncodedImages& images, const std::vector<int32_t>& labels,
                         int64_t num_classes, const std::vector<int64_t>& order) {
  const std::string name = "image-folder";
  const uint64_t ndims = 1, count = order.size();
  std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(tmp + ": cannot create: " + std::strerror(errno));
  const uint64_t header_bytes = align64(kFixedHeader + 8 * ndims + name.size());
  std::string zeros(64, '\0');
  std::string placeholder(header_bytes, '\0');
  out.write(placeholder.data(), static_cast<std::streamsize>(placeholder.size()));
  std::string index(kPackedIndexEntry * count, '\0');
  std::vector<int32_t> record_labels;
  uint64_t encoded = 0;
  for (uint64_t k = 0; k < count; ++k) {
    int64_t i = order[k];
    std::vector<uint8_t> b = images.bytes(i);
    if (b.size() > UINT32_MAX) throw Error(images.name(i) + ": " + std::to_string(b.size()) + " bytes exceed 4 GiB");
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    put<uint64_t>(&index, kPackedIndexEntry * k, encoded);
    put<uint32_t>(&index, kPackedIndexEntry * k + 8, static_cast<uint32_t>(b.size()));
    put<uint32_t>(&index, kPackedIndexEntry * k + 12, crc_of(b.data(), b.size()));
    encoded += b.size();
    record_labels.push_back(labels.at(static_cast<size_t>(i)));
  }
  Layout l = image_layout_for(static_cast<int64_t>(count), encoded, ndims, name.size());
  auto pad_to = [&](uint64_t off) {
    uint64_t pos = static_cast<uint64_t>(out.tellp());
    out.write(zeros.data(), static_cast<std::streamsize>(off - pos));
  };
  pad_to(l.labels_offset);
  out.write(reinterpret_cast<const char*>(record_labels.data()), static_cast<std::streamsize>(l.labels_bytes));
  pad_to(l.targets_offset);
  out.write(index.data(), static_cast<std::streamsize>(index.size()));
  pad_to(l.file_bytes);

  std::string header(l.header_bytes, '\0');
  std::memcpy(&header[0], kPackedMagic, 8);
  put<uint32_t>(&header, 8, kPackedImagesVersion);
  put<uint32_t>(&header, 12, static_cast<uint32_t>(l.header_bytes));
  put<int64_t>(&header, 16, static_cast<int64_t>(count));
  put<int64_t>(&header, 24, num_classes);
  put<int64_t>(&header, 32, 0);
  put<uint32_t>(&header, 40, static_cast<uint32_t>(ndims));
  put<uint32_t>(&header, 44, static_cast<uint32_t>(name.size()));
  put<uint64_t>(&header, 48, l.features_offset);
  put<uint64_t>(&header, 56, l.labels_offset);
  put<uint64_t>(&header, 64, l.targets_offset);
  put<uint64_t>(&header, 72, l.file_bytes);
  put<uint32_t>(&header, 80, crc_of(index.data(), index.size()));
  put<uint32_t>(&header, 84, crc_of(record_labels.data(), l.labels_bytes));
  put<uint64_t>(&header, 96, encoded);
  put<int64_t>(&header, kFixedHeader, 3);
  std::memcpy(&header[kFixedHeader + 8 * ndims], name.data(), name.size());
  put<uint32_t>(&header, 92, crc_of(header.data(), header.size()));
  out.seekp(0);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (!out.flush()) {
    std::remove(tmp.c_str());
    throw Error(tmp + ": write failed: " + std::strerror(errno));
  }
  out.close();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename " + tmp + " into place: " + why);
  }
}

PackedImages::PackedImages(const std::string& path) : path_(path) {
  binary::require_regular_file(path, "data file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  Header h = read_header(in, path);
  if (!h.info.encoded_images) {
    throw Error(path +
                ": holds float samples (version 1, `pshard data convert`), not encoded images: use it with "
                "data.name = packed");
  }
  encoded_offset_ = h.layout.features_offset;
  num_classes_ = h.info.num_classes;
  labels_.resize(static_cast<size_t>(h.info.count));
  read_at(in, path, h.layout.labels_offset, labels_.data(), h.layout.labels_bytes, "labels");
  check_crc(path, labels_.data(), h.layout.labels_bytes, h.layout.labels_offset, h.labels_crc, "labels");
  std::string index(h.layout.targets_bytes, '\0');
  read_at(in, path, h.layout.targets_offset, &index[0], index.size(), "index");
  check_crc(path, index.data(), index.size(), h.layout.targets_offset, h.features_crc, "index");
  uint64_t expect = 0;
  index_.resize(labels_.size());
  for (size_t i = 0; i < index_.size(); ++i) {
    uint64_t at_byte = h.layout.targets_offset + kPackedIndexEntry * i;
    Entry e{get<uint64_t>(index, kPackedIndexEntry * i), get<uint32_t>(index, kPackedIndexEntry * i + 8),
            get<uint32_t>(index, kPackedIndexEntry * i + 12)};
    if (e.offset != expect || e.offset + e.length > h.layout.features_bytes) {
      throw Error(at(path, at_byte) + "index entry of record " + std::to_string(i) + " (offset " +
                  std::to_string(e.offset) + ", " + std::to_string(e.length) + " bytes) does not follow record " +
                  std::to_string(i) + "'s predecessor inside the " + std::to_string(h.layout.features_bytes) +
                  "-byte encoded section");
    }
    int32_t y = labels_[i];
    if (y < 0 || y >= num_classes_) {
      throw Error(at(path, h.layout.labels_offset + 4 * i) + "label " + std::to_string(y) + " of record " +
                  std::to_string(i) + " is not a class 0.." + std::to_string(num_classes_ - 1));
    }
    expect = e.offset + e.length;
    index_[i] = e;
  }
  if (expect != h.layout.features_bytes) {
    throw Error(at(path, 96) + "the index covers " + std::to_string(expect) + " of the " +
                std::to_string(h.layout.features_bytes) + " encoded bytes");
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
}

PackedImages::~PackedImages() {
  if (fd_ >= 0) ::close(fd_);
}

std::string PackedImages::name(int64_t i) const { return path_ + " record " + std::to_string(i); }

std::vector<uint8_t> PackedImages::bytes(int64_t i) const {
  const Entry& e = index_.at(static_cast<size_t>(i));
  std::vector<uint8_t> out(e.length);
  uint64_t off = encoded_offset_ + e.offset, done = 0;
  while (done < e.length) {
    ssize_t got = ::pread(fd_, out.data() + done, e.length - done, static_cast<off_t>(off + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw Error(name(i) + ": read failed at byte " + std::to_string(off + done) + ": " +
                  (got < 0 ? std::strerror(errno) : "end of file"));
    }
    done += static_cast<uint64_t>(got);
  }
  if (crc_of(out.data(), out.size()) != e.crc) {
    throw Error(name(i) + ": checksum mismatch over bytes [" + std::to_string(off) + ", " +
                std::to_string(off + e.length) + ") (corrupt file)");
  }
  return out;
}

}  // namespace pshard::data
