// JPEG (libjpeg-turbo's libjpeg API) and PNG (libpng's simplified API) decoding into RGB pixels.
#include "worker/data/image_codec.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t declared first
#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF
// clang-format on
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>

#include "common/error.h"

namespace pshard::data {

ImageFormat sniff_image_format(const uint8_t* bytes, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) return ImageFormat::kJpeg;
  if (size >= 8 && std::memcmp(bytes, kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

namespace {

// libjpeg reports fatal errors through error_exit, which must not return:
// it jumps back to decode_jpeg_into with the message kept here.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are ignored as PIL ignores them, except data ending early: libjpeg
// would fill the rest with grey, which is a damaged image, not a sample.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

// PIL's CMYK to RGB (Convert.c cmyk2rgb): R = (255 - K) - C (255 - K) / 255, rounded as its MULDIV255. Adobe's
// applications store CMYK inverted (255 = no ink) and mark the file with an Adobe segment; PIL reads such files as
// "CMYK;I", and so does this.
void cmyk_to_rgb(const JSAMPLE* cmyk, JDIMENSION width, bool inverted, JSAMPLE* rgb) {
  auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (JDIMENSION x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = inverted ? 255 - cmyk[3] : cmyk[3];
    const int nk = 255 - k;
    for (int c = 0; c < 3; ++c) {
      const int ink = inverted ? 255 - cmyk[c] : cmyk[c];
      rgb[c] = static_cast<JSAMPLE>(std::clamp(nk - muldiv255(ink, nk), 0, 255));
    }
  }
}

// Only plain data and pointers live in this frame, so the longjmp out of
// libjpeg skips no destructor. Returns false with e->message set on failure.
bool decode_jpeg_into(const uint8_t* bytes, size_t size, RgbImage* out, JpegErrors* e) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_fail;
  e->mgr.emit_message = jpeg_message;
  e->message[0] = '\0';
  if (setjmp(e->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.image_width == 0 || cinfo.image_height == 0 || cinfo.image_width > kMaxImageSide ||
      cinfo.image_height > kMaxImageSide ||
      static_cast<int64_t>(cinfo.image_width) * cinfo.image_height > kMaxImagePixels) {
    std::snprintf(e->message, sizeof(e->message), "image size %ux%u is outside 1..%d per side, %lld pixels",
                  cinfo.image_width, cinfo.image_height, kMaxImageSide, static_cast<long long>(kMaxImagePixels));
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  // Grey and YCbCr become RGB in libjpeg; CMYK and YCCK (print and ImageNet's few CMYK photos) come out as CMYK and
  // are converted here, as PIL converts them.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&cinfo);
  out->width = static_cast<int>(cinfo.output_width);
  out->height = static_cast<int>(cinfo.output_height);
  out->pixels.resize(static_cast<size_t>(out->width) * out->height * 3);
  // A CMYK row goes through a buffer of libjpeg's own pool (freed with cinfo: nothing here to destroy on a longjmp).
  JSAMPARRAY cmyk_row =
      cmyk ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE, cinfo.output_width * 4, 1)
           : nullptr;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out->pixels.data() + static_cast<size_t>(cinfo.output_scanline) * out->width * 3;
    if (!cmyk) {
      jpeg_read_scanlines(&cinfo, &row, 1);
      continue;
    }
    jpeg_read_scanlines(&cinfo, cmyk_row, 1);
    cmyk_to_rgb(cmyk_row[0], cinfo.output_width, cinfo.saw_Adobe_marker != 0, row);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

RgbImage decode_png(const uint8_t* bytes, size_t size, const std::string& what) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes, size)) {
    throw Error(what + ": not a readable PNG (" + image.message + ")");
  }
  if (image.width == 0 || image.height == 0 || image.width > kMaxImageSide || image.height > kMaxImageSide ||
      static_cast<int64_t>(image.width) * image.height > kMaxImagePixels) {
    png_image_free(&image);
    throw Error(what + ": image size " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                " is outside 1.." + std::to_string(kMaxImageSide) + " per side, " + std::to_string(kMaxImagePixels) +
                " pixels");
  }
  // RGBA keeps colour values as stored (RGB output would composite them onto
  // a background); the alpha is then dropped as PIL's convert("RGB") does.
  image.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, rgba.data(), 0, nullptr)) {
    std::string msg = image.message;
    png_image_free(&image);
    throw Error(what + ": corrupt or truncated PNG (" + msg + ")");
  }
  RgbImage out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  size_t n = static_cast<size_t>(out.width) * out.height;
  out.pixels.resize(n * 3);
  for (size_t i = 0; i < n; ++i) std::memcpy(&out.pixels[i * 3], &rgba[i * 4], 3);
  return out;
}

}  // namespace

RgbImage decode_image(const uint8_t* bytes, size_t size, const std::string& what) {
  if (size == 0) throw Error(what + ": empty file (0 bytes), not an image");
  switch (sniff_image_format(bytes, size)) {
    case ImageFormat::kJpeg: {
      RgbImage out;
      JpegErrors errors;
      if (!decode_jpeg_into(bytes, size, &out, &errors)) {
        throw Error(what + ": corrupt or truncated JPEG (" + errors.message + ")");
      }
      return out;
    }
    case ImageFormat::kPng: return decode_png(bytes, size, what);
    case ImageFormat::kUnknown: break;
  }
  throw Error(what + ": not a JPEG or PNG image (the first bytes are neither FF D8 FF nor the PNG signature)");
}

namespace {

bool encode_jpeg_into(const RgbImage& image, int quality, unsigned char** buf, unsigned long* size, JpegErrors* e) {
  jpeg_compress_struct cinfo;
  cinfo.err = jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_fail;
  if (setjmp(e->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, buf, size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row =
        const_cast<uint8_t*>(image.pixels.data()) + static_cast<size_t>(cinfo.next_scanline) * image.width * 3;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3) {
    throw Error("encode_jpeg: " + std::to_string(image.pixels.size()) + " bytes do not hold a " +
                std::to_string(image.width) + "x" + std::to_string(image.height) + " RGB image");
  }
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  JpegErrors errors;
  bool ok = encode_jpeg_into(image, quality, &buf, &size, &errors);
  std::vector<uint8_t> out;
  if (ok) out.assign(buf, buf + size);
  std::free(buf);
  if (!ok) throw Error(std::string("encode_jpeg: ") + errors.message);
  return out;
}

}  // namespace pshard::data
