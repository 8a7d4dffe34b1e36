// Crop boxes, flip and resize: exact geometry on synthetic images, PIL's bilinear resize as the reference.
#include "worker/data/image_transform.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "tests/worker/data/temp_dir.h"
#include "worker/data/image_folder.h"

namespace pshard::data {
namespace {

// Pixel (x, y) has R = x, G = y, B = x + y: any misplaced pixel shows.
RgbImage coordinate_image(int width, int height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      image.pixels.push_back(static_cast<uint8_t>(x));
      image.pixels.push_back(static_cast<uint8_t>(y));
      image.pixels.push_back(static_cast<uint8_t>(x + y));
    }
  return image;
}

// Unnormalised grey levels of channel c at (x, y) of a size x size CHW output (stats mean 0, std 1).
double level(const std::vector<float>& out, int size, int c, int x, int y) {
  return out[static_cast<size_t>((c * size + y) * size + x)] * 255.0;
}

TEST(ImageTransform, CropOfOutputSizeCopiesPixelsExactly) {
  RgbImage image = coordinate_image(50, 40);
  std::vector<float> out(3 * 12 * 12);
  crop_resize_normalize(image, {7, 9, 12, 12}, 12, false, ChannelStats{}, out.data());
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 12; ++x) {
      EXPECT_NEAR(level(out, 12, 0, x, y), 7 + x, 1e-3);
      EXPECT_NEAR(level(out, 12, 1, x, y), 9 + y, 1e-3);
      EXPECT_NEAR(level(out, 12, 2, x, y), 16 + x + y, 1e-3);
    }
}

TEST(ImageTransform, FlipMirrorsColumnsExactly) {
  RgbImage image = coordinate_image(30, 20);
  std::vector<float> plain(3 * 10 * 10), flipped(3 * 10 * 10);
  crop_resize_normalize(image, {3, 4, 10, 10}, 10, false, ChannelStats{}, plain.data());
  crop_resize_normalize(image, {3, 4, 10, 10}, 10, true, ChannelStats{}, flipped.data());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 10; ++y)
      for (int x = 0; x < 10; ++x) EXPECT_EQ(level(flipped, 10, c, x, y), level(plain, 10, c, 9 - x, y));
  EXPECT_NEAR(level(flipped, 10, 0, 0, 0), 12, 1e-3);  // the box's last column, x = 3 + 9
}

TEST(ImageTransform, NormalisesPerChannel) {
  RgbImage image = coordinate_image(8, 8);
  ChannelStats stats;
  stats.mean = {0.5f, 0.25f, 0.0f};
  stats.std = {0.5f, 2.0f, 1.0f};
  std::vector<float> out(3 * 8 * 8);
  crop_resize_normalize(image, {0, 0, 8, 8}, 8, false, stats, out.data());
  EXPECT_NEAR(out[5], (5 / 255.0 - 0.5) / 0.5, 1e-6);            // R of (5, 0)
  EXPECT_NEAR(out[64 + 3 * 8], (3 / 255.0 - 0.25) / 2.0, 1e-6);  // G of (0, 3)
}

TEST(ImageTransform, DownscaleAveragesAndConstantStaysConstant) {
  RgbImage image;
  image.width = 64;
  image.height = 48;
  image.pixels.assign(64 * 48 * 3, 77);
  std::vector<float> out(3 * 7 * 7);
  crop_resize_normalize(image, {3, 2, 57, 41}, 7, false, ChannelStats{}, out.data());
  for (float v : out) EXPECT_NEAR(v * 255.0, 77.0, 1e-3);
}

TEST(ImageTransform, CenterCropBoxIsCentredSquare) {
  // Resize 256 + crop 224 of a 400x300 image: a 262.5 -> 263 px square in the middle.
  EXPECT_EQ(center_crop_box(400, 300, 224, 256), (CropBox{68, 18, 263, 263}));
  EXPECT_EQ(center_crop_box(32, 32, 28, 32), (CropBox{2, 2, 28, 28}));
}

TEST(ImageTransform, RandomResizedCropBoxesStayInsideAndFollowTheRanges) {
  PortableRng rng(7);
  for (int i = 0; i < 2000; ++i) {
    int w = 20 + i % 300, h = 15 + (i * 7) % 200;
    CropBox b = random_resized_crop_box(w, h, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_GT(b.w, 0);
    ASSERT_GT(b.h, 0);
    ASSERT_LE(b.x + b.w, w);
    ASSERT_LE(b.y + b.h, h);
    double ratio = static_cast<double>(b.w) / b.h;
    // Rounding to whole pixels moves the ratio a little off 3/4..4/3 on small boxes.
    EXPECT_GT(ratio, 0.75 * 0.7);
    EXPECT_LT(ratio, 4.0 / 3.0 / 0.7);
  }
  PortableRng a(11), b(11);
  EXPECT_EQ(random_resized_crop_box(224, 160, a), random_resized_crop_box(224, 160, b));
}

TEST(ImageTransform, BilinearResizeMatchesPil) {
  testing::TempDir dir;
  const char* src = std::getenv("PSHARD_SOURCE_DIR");
  std::string script = std::string(src ? src : ".") + "/tests/worker/data/image_reference/pil_reference.py";
  if (std::system(("/usr/bin/python3 " + script + " " + dir.path() + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with PIL is not installed";
  }
  std::vector<uint8_t> bytes = read_file_bytes(dir.file("photo.jpg"));
  RgbImage image = decode_image(bytes.data(), bytes.size(), "photo.jpg");
  std::vector<float> out(3 * 16 * 16);
  crop_resize_normalize(image, {5, 7, 33, 21}, 16, false, ChannelStats{}, out.data());
  std::string ref = testing::read_all(dir.file("photo.resize.rgb"));
  ASSERT_EQ(ref.size(), 16u * 16u * 3u);
  double worst = 0;
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x)
      for (int c = 0; c < 3; ++c) {
        double want = static_cast<uint8_t>(ref[static_cast<size_t>((y * 16 + x) * 3 + c)]);
        worst = std::max(worst, std::fabs(level(out, 16, c, x, y) - want));
      }
  // Within one grey level: PIL rounds to 8 bits between its two passes and at the end; this resize stays in float.
  EXPECT_LE(worst, 1.0);
}

}  // namespace
}  // namespace pshard::data
