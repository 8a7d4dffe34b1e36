// IDX reader/writer and the MNIST/Fashion-MNIST split loader.
#include "worker/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "common/error.h"
#include "worker/data/byte_source.h"

namespace pshard::data {
namespace {

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// `dir/base` or `dir/base.gz`, whichever exists.
std::string find_idx_file(const std::string& dir, const std::string& base) {
  std::string plain = dir + "/" + base;
  if (file_exists(plain)) return plain;
  if (file_exists(plain + ".gz")) return plain + ".gz";
  throw Error("data.dir " + dir + ": neither " + base + " nor " + base + ".gz exists (set data.dir to the folder of " +
              "the IDX files)");
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_ndims, int64_t max_items) {
  ByteSource in(path);
  uint8_t magic[4];
  in.read_exact(magic, 4, "IDX magic");
  if (magic[0] != 0 || magic[1] != 0) {
    throw Error(path + ": bad IDX magic at byte 0: expected 00 00 <type> <ndims>, got " + std::to_string(magic[0]) +
                " " + std::to_string(magic[1]) + " (not an IDX file?)");
  }
  if (magic[2] != 0x08) {
    char type[8];
    std::snprintf(type, sizeof type, "0x%02X", magic[2]);
    throw Error(path + ": unsupported IDX element type " + type + " at byte 2: only unsigned byte (0x08) is read");
  }
  int ndims = magic[3];
  if (ndims < 1 || (expected_ndims > 0 && ndims != expected_ndims)) {
    throw Error(path + ": IDX header at byte 3 says " + std::to_string(ndims) + " dimensions, expected " +
                std::to_string(expected_ndims));
  }
  IdxArray out;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    uint8_t b[4];
    in.read_exact(b, 4, "IDX dimension " + std::to_string(d));
    int64_t v = (int64_t(b[0]) << 24) | (int64_t(b[1]) << 16) | (int64_t(b[2]) << 8) | int64_t(b[3]);
    if (v <= 0 && d > 0) {
      throw Error(path + ": IDX dimension " + std::to_string(d) + " at byte " + std::to_string(4 + 4 * d) + " is 0");
    }
    if (v > 0 && total > (int64_t(1) << 40) / v) {
      throw Error(path + ": IDX dimensions at byte 4 describe more than 2^40 bytes");
    }
    total *= v;
    out.dims.push_back(v);
  }
  bool limited = max_items > 0 && max_items < out.dims[0];
  if (limited) {
    total = total / out.dims[0] * max_items;
    out.dims[0] = max_items;
  }
  std::string what = "data (" + std::to_string(out.dims[0]);
  for (size_t d = 1; d < out.dims.size(); ++d) what += "x" + std::to_string(out.dims[d]);
  what += " bytes)";
  // Not resize(total) first: a corrupt header may announce terabytes; memory follows the file.
  in.read_exact_append(&out.data, static_cast<size_t>(total), what);
  if (!limited && !in.at_end()) {
    throw Error(path + ": unexpected bytes after the IDX data at byte " + std::to_string(in.offset()) +
                " (the header announces " + std::to_string(in.offset()) + " bytes in all)");
  }
  return out;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data) {
  if (dims.empty() || dims.size() > 255) throw Error(path + ": IDX needs 1..255 dimensions");
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total != static_cast<int64_t>(data.size())) {
    throw Error(path + ": IDX dims describe " + std::to_string(total) + " bytes but " + std::to_string(data.size()) +
                " were given");
  }
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (int64_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((d >> s) & 0xff));
  }
  bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
  bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) throw Error(path + ": cannot create: " + std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, 1u << 30));
      if (gzwrite(f, bytes.data() + done, chunk) != static_cast<int>(chunk)) {
        gzclose(f);
        throw Error(path + ": write failed at byte " + std::to_string(done));
      }
      done += chunk;
    }
    if (gzclose(f) != Z_OK) throw Error(path + ": closing the gzip stream failed");
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create: " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw Error(path + ": write failed");
}

Dataset load_idx_split(const std::string& dir, const std::string& split, const std::string& dataset_name,
                       int64_t max_samples, bool normalize) {
  std::string prefix = split == "train" ? "train" : "t10k";
  std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(images_path, 3, max_samples);
  IdxArray labels = read_idx(labels_path, 1, max_samples);
  if (images.dims[0] != labels.dims[0]) {
    throw Error(images_path + " holds " + std::to_string(images.dims[0]) + " images but " + labels_path + " holds " +
                std::to_string(labels.dims[0]) + " labels");
  }
  Dataset d;
  d.name = dataset_name;
  d.sample_shape = {1, images.dims[1], images.dims[2]};
  d.num_classes = 10;
  int64_t n = images.dims[0];
  d.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t y = labels.data[static_cast<size_t>(i)];
    if (y >= 10) {
      throw Error(labels_path + ": label " + std::to_string(y) + " at byte " + std::to_string(8 + i) +
                  " is not a class 0..9");
    }
    d.labels[static_cast<size_t>(i)] = y;
  }
  d.features.resize(images.data.size());
  Normalization norm = normalize ? image_normalization(dataset_name) : Normalization{};
  pixels_to_features(images.data.data(), n, 1, images.dims[1] * images.dims[2], norm, d.features.data());
  return d;
}

}  // namespace pshard::data
