// Portable seeded random numbers: splitmix64, uniform doubles, Box-Muller normals.
#include "worker/data/random.h"

#include <cmath>

namespace pshard::data {

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t PortableRng::next_u64() {  // splitmix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double PortableRng::uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

double PortableRng::normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  double u1 = 0;
  while (u1 <= 0) u1 = uniform();
  double u2 = uniform();
  double r = std::sqrt(-2.0 * std::log(u1));
  const double kTwoPi = 6.283185307179586;
  spare_ = r * std::sin(kTwoPi * u2);
  have_spare_ = true;
  return r * std::cos(kTwoPi * u2);
}

}  // namespace pshard::data
