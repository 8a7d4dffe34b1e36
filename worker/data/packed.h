// Packed record files: preprocessed float32 samples, labels and targets in one file with a checked header.
#pragma once

#include <cstdint>
#include <string>

#include "worker/data/dataset.h"
#include "worker/data/image_source.h"

namespace pshard::data {

// Layout of a packed file (all integers little-endian; sections 64-byte aligned):
//
//   offset  bytes  field
//   0       8      magic "PSHDPACK"
//   8       4      u32 version (1)
//   12      4      u32 header_bytes: where the header (incl. shape and name) ends, padded to 64
//   16      8      i64 count: number of samples
//   24      8      i64 num_classes (0: regression, no labels section)
//   32      8      i64 target_dim (0: no targets section)
//   40      4      u32 ndims of one sample (1..8)
//   44      4      u32 name_bytes: length of the data set name
//   48      8      u64 features_offset: float32 [count][sample elems]
//   56      8      u64 labels_offset:   int32 [count]               (0 when num_classes == 0)
//   64      8      u64 targets_offset:  float32 [count][target_dim] (0 when target_dim == 0)
//   72      8      u64 file_bytes: total size of the file
//   80      4      u32 crc32 of the features section
//   84      4      u32 crc32 of the labels section (0 when absent)
//   88      4      u32 crc32 of the targets section (0 when absent)
//   92      4      u32 crc32 of header bytes [0, header_bytes) with this field read as 0
//   96      32     reserved, zero
//   128     8*ndims  i64 sample shape
//   ...     name_bytes  data set name (UTF-8, no terminator), then zero padding to header_bytes
//
// The index is implicit because records have a fixed size: sample i's
// features start at features_offset + 4 * i * elems and its label at
// labels_offset + 4 * i. Features are stored already preprocessed (the
// normalisation of the source data set), so reading is a plain copy.
//
//   write_packed("fmnist.train.pshd", splits.train);
//   Dataset again = read_packed("fmnist.train.pshd");   // identical features and labels
//
// Version 2 holds encoded images (JPEG/PNG bytes as found in an image folder,
// written by `pshard data pack`), decoded and augmented when batches are made.
// The header is the same, with these differences:
//   8       4      u32 version (2)
//   32      8      i64 target_dim: 0
//   40      4      u32 ndims: 1, sample shape {3} (RGB)
//   48      8      u64 offset of the encoded section: the images' bytes back to back
//   64      8      u64 offset of the index: [count] x {u64 offset into the encoded
//                  section, u32 length, u32 crc32 of the record} (16 bytes each)
//   80      4      u32 crc32 of the index section
//   96      8      u64 encoded_bytes: size of the encoded section
// and the sections are encoded, labels, index (each 64-byte aligned).
constexpr char kPackedMagic[8] = {'P', 'S', 'H', 'D', 'P', 'A', 'C', 'K'};
constexpr uint32_t kPackedVersion = 1;
constexpr uint32_t kPackedImagesVersion = 2;
constexpr uint64_t kPackedIndexEntry = 16;

// Writes `data` to `path` atomically (a temporary file renamed into place).
void write_packed(const std::string& path, const Dataset& data);

// Reads a packed file; max_samples > 0 keeps the first N samples (the
// section checksums are then only checked for the header). Every problem
// (bad magic, version, inconsistent header, truncation, checksum mismatch)
// is an Error naming the file and the byte offset.
Dataset read_packed(const std::string& path, int64_t max_samples = 0);

// Header fields of a packed file, for `pshard data info`.
struct PackedInfo {
  std::string name;
  std::vector<int64_t> sample_shape;
  int64_t count = 0, num_classes = 0, target_dim = 0;
  uint64_t file_bytes = 0;
  bool encoded_images = false;  // version 2
};
PackedInfo read_packed_info(const std::string& path);

// Writes images[order[k]] as record k with label labels[order[k]] (version 2),
// atomically. Each image is read once; its bytes are stored as they are.
void write_packed_images(const std::string& path, const EncodedImages& images, const std::vector<int32_t>& labels,
                         int64_t num_classes, const std::vector<int64_t>& order);

// The records of a version-2 file. Opening checks the header, the index
// (checksum, records inside the encoded section, in order) and the labels;
// bytes(i) checks record i's crc32. Errors name the file, record and byte.
class PackedImages : public EncodedImages {
 public:
  explicit PackedImages(const std::string& path);
  ~PackedImages() override;
  PackedImages(const PackedImages&) = delete;
  PackedImages& operator=(const PackedImages&) = delete;
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  std::vector<uint8_t> bytes(int64_t i) const override;
  std::string name(int64_t i) const override;
  const std::vector<int32_t>& labels() const { return labels_; }
  int64_t num_classes() const { return num_classes_; }

 private:
  struct Entry {
    uint64_t offset;
    uint32_t length, crc;
  };
  std::string path_;
  int fd_ = -1;
  uint64_t encoded_offset_ = 0;
  int64_t num_classes_ = 0;
  std::vector<int32_t> labels_;
  std::vector<Entry> index_;
};

}  // namespace pshard::data
