// Decoding of encoded images (JPEG through libjpeg-turbo, PNG through libpng) into 8-bit RGB pixels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pshard::data {

// Decoded pixels, row-major HWC with 3 channels (RGB). Grey and palette
// images are expanded to RGB and alpha is dropped, as PIL's
// Image.convert("RGB") does; 16-bit PNG samples are reduced to 8 bits by
// libpng's simplified reader.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height * width * 3
  uint8_t at(int y, int x, int c) const { return pixels[(static_cast<size_t>(y) * width + x) * 3 + c]; }
};

enum class ImageFormat { kUnknown, kJpeg, kPng };

// The format announced by the first bytes (JPEG FF D8 FF, PNG's 8-byte signature).
ImageFormat sniff_image_format(const uint8_t* bytes, size_t size);

// Largest width or height, and largest width x height, accepted, so that a
// corrupt header cannot ask for gigabytes (2^26 pixels: 8192 x 8192, 192 MiB as RGB).
constexpr int kMaxImageSide = 1 << 14;
constexpr int64_t kMaxImagePixels = int64_t(1) << 26;

// Decodes a JPEG or PNG held in memory. Every problem (empty input, unknown
// format, corrupt or truncated data, a side of 0 or above kMaxImageSide, more
// than kMaxImagePixels pixels) is an
// Error whose text starts with `what` (a file name) and says what was wrong.
// A JPEG that ends early is an error, not the grey-filled image libjpeg
// would otherwise return.
RgbImage decode_image(const uint8_t* bytes, size_t size, const std::string& what);

// Encodes RGB pixels as a baseline JPEG (quality 1..100), for the test
// folders and the benchmarks.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality);

}  // namespace pshard::data
