// libFuzzer target: an image file through pshard's own reader, decoder and transforms (ImageSource::make_sample).
//
// Input: byte 0 = flags (bit 0: training transform, else evaluation; bits 1-2: output side 8, 16,
// 24 or 33; bits 3-7: epoch), then the file's bytes (JPEG, PNG or anything). Making the sample
// must give finite floats or a pshard::Error naming the file.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "worker/data/image_source.h"

using namespace pshard;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  const std::string bytes = in.rest();
  const std::string& path = fuzz::scratch_path("image");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static const int kSides[4] = {8, 16, 24, 33};
  data::ImageTransform t;
  t.augment = (flags & 1) != 0;
  t.image_size = kSides[(flags >> 1) & 3];
  t.resize = t.image_size + t.image_size / 7;
  t.threads = 1;
  data::ImageSource source(std::vector<std::string>{path}, t);
  std::vector<float> out(static_cast<size_t>(3 * t.image_size * t.image_size), NAN);
  try {
    source.make_sample(0, flags >> 3, out.data());
    for (float v : out) PSHARD_FUZZ_REQUIRE(std::isfinite(v));
  } catch (const Error& e) {
    PSHARD_FUZZ_REQUIRE(std::string(e.what()).find(path) != std::string::npos);
  }
  return 0;
}
