// Portable seeded random numbers for data generation and shuffling (the same on every platform).
#pragma once

#include <cstdint>

namespace pshard::data {

// std:: distributions differ between standard libraries, so data generation
// uses these: splitmix64 seed mixing, uniform [0,1) and Box-Muller normals
// (integers and uniforms are bit-identical everywhere; normals up to libm rounding).
//
//   PortableRng rng(mix_seed(run_seed, epoch));
//   double z = rng.normal();
uint64_t mix_seed(uint64_t a, uint64_t b);
class PortableRng {
 public:
  explicit PortableRng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform();  // [0, 1)
  double normal();   // N(0, 1)

 private:
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0;
};

}  // namespace pshard::data
