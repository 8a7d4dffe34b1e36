// ImageSource: reading, decoding and transforming the samples of a batch on a few threads.
#include "worker/data/image_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "common/util/binary_file.h"
#include "worker/data/random.h"

namespace pshard::data {

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  // Never blocks: a FIFO or device that replaced an image after the folder was scanned is an Error naming it.
  const std::string bytes = binary::read_file(path, "image");
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

ImageSource::ImageSource(std::shared_ptr<const EncodedImages> images, ImageTransform transform)
    : images_(std::move(images)), t_(transform), pool_(std::make_unique<LoopPool>(std::max(1, transform.threads))) {}

void ImageSource::make_sample(int64_t index, int64_t epoch, float* out) const {
  std::vector<uint8_t> bytes = images_->bytes(index);
  RgbImage image = decode_image(bytes.data(), bytes.size(), images_->name(index));
  if (t_.augment) {
    PortableRng rng(mix_seed(mix_seed(t_.seed, static_cast<uint64_t>(epoch)), static_cast<uint64_t>(index)));
    CropBox box = random_resized_crop_box(image.width, image.height, rng);
    bool flip = rng.uniform() < 0.5;
    crop_resize_normalize(image, box, t_.image_size, flip, t_.stats, out);
  } else {
    CropBox box = center_crop_box(image.width, image.height, t_.image_size, t_.resize);
    crop_resize_normalize(image, box, t_.image_size, false, t_.stats, out);
  }
}

void ImageSource::fill(const int64_t* indices, int64_t n, int64_t epoch, float* out) const {
  const int64_t elems = 3ll * t_.image_size * t_.image_size;
  pool_->run(n, [&](int64_t i) { make_sample(indices[i], epoch, out + i * elems); });
}

}  // namespace pshard::data
