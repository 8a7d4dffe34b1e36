// JPEG/PNG decoding against PIL's decodes of the same files, and the errors of damaged bytes.
#include "worker/data/image_codec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "tests/worker/data/temp_dir.h"
#include "worker/data/image_folder.h"

namespace pshard::data {
namespace {

using testing::read_all;
using testing::TempDir;

// Runs the PIL reference script into `dir`; false when PIL (or python3) is missing.
bool make_pil_reference(const std::string& dir) {
  const char* src = std::getenv("PSHARD_SOURCE_DIR");
  std::string script = std::string(src ? src : ".") + "/tests/worker/data/image_reference/pil_reference.py";
  int rc = std::system(("/usr/bin/python3 " + script + " " + dir + " 2>/dev/null").c_str());
  return rc == 0;
}

RgbImage decode_file(const std::string& path) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  return decode_image(bytes.data(), bytes.size(), path);
}

int max_difference(const RgbImage& image, const std::string& reference) {
  EXPECT_EQ(image.pixels.size(), reference.size());
  int worst = 0;
  for (size_t i = 0; i < image.pixels.size() && i < reference.size(); ++i) {
    worst = std::max(worst, std::abs(int(image.pixels[i]) - int(static_cast<uint8_t>(reference[i]))));
  }
  return worst;
}

TEST(ImageCodec, DecodesLikePil) {
  TempDir dir;
  if (!make_pil_reference(dir.path())) GTEST_SKIP() << "/usr/bin/python3 with PIL is not installed";
  for (const char* name : {"photo.jpg", "grey.jpg", "cmyk.jpg", "rgb.png", "grey.png", "rgba.png"}) {
    RgbImage image = decode_file(dir.file(name));
    EXPECT_EQ(image.width, 48) << name;
    EXPECT_EQ(image.height, 40) << name;
    // Within one grey level of PIL after decoding (both use libjpeg-turbo's islow IDCT; PNG is exact).
    EXPECT_LE(max_difference(image, read_all(dir.file(std::string(name) + ".rgb"))), 1) << name;
  }
}

TEST(ImageCodec, JpegRoundTripKeepsPixelsClose) {
  RgbImage image;
  image.width = 24;
  image.height = 16;
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 24; ++x)
      for (int c = 0; c < 3; ++c) image.pixels.push_back(static_cast<uint8_t>(20 + 4 * x + 3 * y + 20 * c));
  std::vector<uint8_t> jpeg = encode_jpeg(image, 95);
  EXPECT_EQ(sniff_image_format(jpeg.data(), jpeg.size()), ImageFormat::kJpeg);
  RgbImage back = decode_image(jpeg.data(), jpeg.size(), "roundtrip.jpg");
  ASSERT_EQ(back.width, 24);
  ASSERT_EQ(back.height, 16);
  int worst = 0;
  for (size_t i = 0; i < image.pixels.size(); ++i)
    worst = std::max(worst, std::abs(int(image.pixels[i]) - int(back.pixels[i])));
  EXPECT_LE(worst, 8);
}

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& what) {
  try {
    decode_image(bytes.data(), bytes.size(), what);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> small_jpeg() {
  RgbImage image;
  image.width = image.height = 32;
  for (int i = 0; i < 32 * 32 * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(i * 7));
  return encode_jpeg(image, 90);
}

TEST(ImageCodec, TruncatedJpegIsAnErrorNamingTheFile) {
  std::vector<uint8_t> jpeg = small_jpeg();
  jpeg.resize(jpeg.size() / 2);
  std::string e = error_of(jpeg, "cat/0001.jpg");
  EXPECT_NE(e.find("cat/0001.jpg: corrupt or truncated JPEG"), std::string::npos) << e;
  EXPECT_NE(e.find("Premature end"), std::string::npos) << e;
}

TEST(ImageCodec, HeaderOnlyJpegIsAnError) {
  std::vector<uint8_t> jpeg = small_jpeg();
  jpeg.resize(20);
  EXPECT_NE(error_of(jpeg, "a.jpg").find("a.jpg: corrupt or truncated JPEG"), std::string::npos);
}

TEST(ImageCodec, TextAndEmptyInputsAreErrors) {
  std::string text = "this is not an image\n";
  std::vector<uint8_t> bytes(text.begin(), text.end());
  EXPECT_EQ(error_of(bytes, "notes.jpg"),
            "notes.jpg: not a JPEG or PNG image (the first bytes are neither FF D8 FF nor the PNG signature)");
  EXPECT_EQ(error_of({}, "empty.png"), "empty.png: empty file (0 bytes), not an image");
}

TEST(ImageCodec, TruncatedPngIsAnError) {
  TempDir dir;
  if (!make_pil_reference(dir.path())) GTEST_SKIP() << "/usr/bin/python3 with PIL is not installed";
  std::vector<uint8_t> png = read_file_bytes(dir.file("rgb.png"));
  png.resize(png.size() - 30);
  std::string e = error_of(png, "x.png");
  EXPECT_NE(e.find("x.png: corrupt or truncated PNG"), std::string::npos) << e;
}

}  // namespace
}  // namespace pshard::data
