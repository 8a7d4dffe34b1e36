// Crop boxes as torchvision draws them and a separable antialiased bilinear resize as PIL computes it.
#include "worker/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "worker/data/sampler.h"

namespace pshard::data {

namespace {

// Integer in [lo, hi] from the portable generator, without modulo bias.
int uniform_int(PortableRng& rng, int lo, int hi) {
  auto gen = [&rng] { return rng.next_u64(); };
  return lo + static_cast<int>(uniform_below(gen, static_cast<uint64_t>(hi - lo) + 1));
}

double uniform(PortableRng& rng, double lo, double hi) { return lo + (hi - lo) * rng.uniform(); }

// Contributions of source samples to each output sample along one axis.
struct AxisWeights {
  std::vector<int> first;      // first source index per output
  std::vector<int> count;      // number of source samples per output
  std::vector<float> weights;  // out * max_count, normalised to sum 1
  int max_count = 0;
};

// PIL's precompute_coeffs for the bilinear (triangle) filter over source
// range [begin, begin + length) resampled to `out` samples.
AxisWeights axis_weights(int begin, int length, int out) {
  AxisWeights a;
  double scale = static_cast<double>(length) / out;
  double filterscale = std::max(scale, 1.0);
  double support = 1.0 * filterscale;
  a.max_count = static_cast<int>(std::ceil(support)) * 2 + 1;
  a.first.resize(static_cast<size_t>(out));
  a.count.resize(static_cast<size_t>(out));
  a.weights.assign(static_cast<size_t>(out) * a.max_count, 0.f);
  for (int o = 0; o < out; ++o) {
    double center = begin + (o + 0.5) * scale;
    int lo = std::max(static_cast<int>(center - support + 0.5), begin);
    int hi = std::min(static_cast<int>(center + support + 0.5), begin + length);
    double total = 0;
    std::vector<double> w;
    for (int i = lo; i < hi; ++i) {
      double d = std::fabs((i - center + 0.5) / filterscale);
      double v = d < 1.0 ? 1.0 - d : 0.0;
      w.push_back(v);
      total += v;
    }
    a.first[static_cast<size_t>(o)] = lo;
    a.count[static_cast<size_t>(o)] = hi - lo;
    for (size_t k = 0; k < w.size(); ++k) {
      a.weights[static_cast<size_t>(o) * a.max_count + k] = static_cast<float>(total > 0 ? w[k] / total : 0.0);
    }
  }
  return a;
}

}  // namespace

CropBox random_resized_crop_box(int width, int height, PortableRng& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(3.0 / 4.0), log_hi = std::log(4.0 / 3.0);
  for (int attempt = 0; attempt < 10; ++attempt) {
    double target_area = area * uniform(rng, 0.08, 1.0);
    double aspect = std::exp(uniform(rng, log_lo, log_hi));
    int w = static_cast<int>(std::lround(std::sqrt(target_area * aspect)));
    int h = static_cast<int>(std::lround(std::sqrt(target_area / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      int y = uniform_int(rng, 0, height - h);
      int x = uniform_int(rng, 0, width - w);
      return {x, y, w, h};
    }
  }
  // Fallback: the whole image, cut to the nearest allowed ratio.
  double ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (ratio < 3.0 / 4.0) {
    h = static_cast<int>(std::lround(w / (3.0 / 4.0)));
  } else if (ratio > 4.0 / 3.0) {
    w = static_cast<int>(std::lround(h * (4.0 / 3.0)));
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

CropBox center_crop_box(int width, int height, int size, int resize) {
  if (size <= 0 || resize < size) {
    throw Error("center_crop_box: crop " + std::to_string(size) + " must be in 1..resize " + std::to_string(resize));
  }
  int side = static_cast<int>(std::lround(static_cast<double>(std::min(width, height)) * size / resize));
  side = std::max(1, std::min(side, std::min(width, height)));
  return {(width - side) / 2, (height - side) / 2, side, side};
}

void crop_resize_normalize(const RgbImage& image, const CropBox& box, int size, bool flip, const ChannelStats& stats,
                           float* out) {
  if (box.w <= 0 || box.h <= 0 || box.x < 0 || box.y < 0 || box.x + box.w > image.width ||
      box.y + box.h > image.height || size <= 0) {
    throw Error("crop_resize_normalize: box " + std::to_string(box.w) + "x" + std::to_string(box.h) + "+" +
                std::to_string(box.x) + "+" + std::to_string(box.y) + " is not inside the " +
                std::to_string(image.width) + "x" + std::to_string(image.height) + " image");
  }
  AxisWeights wx = axis_weights(box.x, box.w, size);
  AxisWeights wy = axis_weights(box.y, box.h, size);
  // Horizontal pass over the rows the vertical pass reads: rows [box.y, box.y + box.h).
  std::vector<float> rows(static_cast<size_t>(box.h) * size * 3);
  for (int r = 0; r < box.h; ++r) {
    const uint8_t* src = image.pixels.data() + (static_cast<size_t>(box.y + r) * image.width) * 3;
    float* dst = rows.data() + static_cast<size_t>(r) * size * 3;
    for (int o = 0; o < size; ++o) {
      const float* w = wx.weights.data() + static_cast<size_t>(o) * wx.max_count;
      const uint8_t* s = src + static_cast<size_t>(wx.first[static_cast<size_t>(o)]) * 3;
      float c0 = 0, c1 = 0, c2 = 0;
      for (int k = 0; k < wx.count[static_cast<size_t>(o)]; ++k) {
        c0 += w[k] * s[3 * k];
        c1 += w[k] * s[3 * k + 1];
        c2 += w[k] * s[3 * k + 2];
      }
      dst[3 * o] = c0;
      dst[3 * o + 1] = c1;
      dst[3 * o + 2] = c2;
    }
  }
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * stats.std[static_cast<size_t>(c)]);
    shift[c] = -stats.mean[static_cast<size_t>(c)] / stats.std[static_cast<size_t>(c)];
  }
  const size_t plane = static_cast<size_t>(size) * size;
  for (int o = 0; o < size; ++o) {
    const float* w = wy.weights.data() + static_cast<size_t>(o) * wy.max_count;
    int first = wy.first[static_cast<size_t>(o)] - box.y;
    int count = wy.count[static_cast<size_t>(o)];
    for (int x = 0; x < size; ++x) {
      float c0 = 0, c1 = 0, c2 = 0;
      for (int k = 0; k < count; ++k) {
        const float* s = rows.data() + (static_cast<size_t>(first + k) * size + x) * 3;
        c0 += w[k] * s[0];
        c1 += w[k] * s[1];
        c2 += w[k] * s[2];
      }
      size_t at = static_cast<size_t>(o) * size + static_cast<size_t>(flip ? size - 1 - x : x);
      out[at] = c0 * scale[0] + shift[0];
      out[plane + at] = c1 * scale[1] + shift[1];
      out[2 * plane + at] = c2 * scale[2] + shift[2];
    }
  }
}

}  // namespace pshard::data
