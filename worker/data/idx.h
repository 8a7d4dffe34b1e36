// IDX files (MNIST, Fashion-MNIST): read and write unsigned-byte arrays, plain or gzip.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/data/dataset.h"

namespace pshard::data {

// An IDX array of unsigned bytes: dims as in the header, data row-major.
//
//   IdxArray images = read_idx("/data/train-images-idx3-ubyte.gz", 3, 1000);  // first 1000 images
//   // images.dims == {1000, 28, 28}, images.data.size() == 1000 * 784
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

// Reads an IDX file (gzip or plain). Checks the magic (0x00 0x00 type ndims),
// that the element type is unsigned byte (0x08), that ndims ==
// expected_ndims (when > 0), and that the file holds exactly the bytes the
// dims announce. max_items > 0 reads only the first max_items along dim 0
// (the rest of the file is then not checked). Every problem is an Error
// naming the file and the byte offset.
IdxArray read_idx(const std::string& path, int expected_ndims = 0, int64_t max_items = 0);

// Writes an IDX unsigned-byte file; gzip-compressed when path ends in ".gz".
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data);

// Loads MNIST-style images + labels from `dir`: {train,t10k}-images-idx3-ubyte
// and {train,t10k}-labels-idx1-ubyte, each either plain or with ".gz".
// `split` is "train" or "test"; max_samples > 0 keeps the first N.
// Labels must be < 10; the two files must agree on the count.
Dataset load_idx_split(const std::string& dir, const std::string& split, const std::string& dataset_name,
                       int64_t max_samples, bool normalize);

}  // namespace pshard::data
