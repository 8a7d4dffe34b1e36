// Image augmentation and evaluation transforms: crop boxes, antialiased bilinear resize, flip, normalise to CHW floats.
#pragma once

#include <array>
#include <cstdint>

#include "worker/data/image_codec.h"
#include "worker/data/random.h"

namespace pshard::data {

// A rectangle of source pixels: columns [x, x+w), rows [y, y+h).
struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;
  bool operator==(const CropBox& o) const { return x == o.x && y == o.y && w == o.w && h == o.h; }
};

// torchvision's RandomResizedCrop box (scale 0.08..1 of the area, aspect
// ratio 3/4..4/3 drawn log-uniformly, up to 10 tries, then the central crop
// with the ratio clamped into range), drawn from `rng`.
CropBox random_resized_crop_box(int width, int height, PortableRng& rng);

// The evaluation box: torchvision's Resize(resize) of the shorter side
// followed by CenterCrop(size), expressed in source pixels (a centred square
// of side min(width, height) * size / resize).
CropBox center_crop_box(int width, int height, int size, int resize);

// Per-channel normalisation of pixels scaled to [0, 1]: (x/255 - mean) / std.
struct ChannelStats {
  std::array<float, 3> mean{0.f, 0.f, 0.f}, std{1.f, 1.f, 1.f};
};

// Resamples `box` of `image` to size x size with PIL's antialiased bilinear
// filter (a triangle filter widened by the scale factor when shrinking, as
// Image.resize(..., BILINEAR) and torchvision's Resize use), mirrors it left
// to right when `flip`, and writes 3 * size * size floats in CHW order,
// normalised with `stats`. A box of exactly size x size copies its pixels.
void crop_resize_normalize(const RgbImage& image, const CropBox& box, int size, bool flip, const ChannelStats& stats,
                           float* out);

}  // namespace pshard::data
