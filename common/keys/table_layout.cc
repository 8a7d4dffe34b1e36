// Embedding tables: row placement and the rows' initial values from a counter-based hash.
#include "common/keys/table_layout.h"

#include <cmath>
#include <set>

#include "common/error.h"

namespace pshard {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t name_hash(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A uniform double in (0, 1) from 53 bits of a hash.
double unit(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

}  // namespace

void table_initial_row(const TableSpec& spec, uint64_t seed, uint64_t row, float* out) {
  const uint64_t base = splitmix64(seed ^ splitmix64(name_hash(spec.name)));
  const uint64_t first = row * spec.dim;
  for (uint32_t c = 0; c < spec.dim; ++c) {
    const uint64_t k = base ^ splitmix64(first + c);
    switch (spec.init) {
      case TableInit::kZeros: out[c] = 0.0f; break;
      case TableInit::kUniform: out[c] = static_cast<float>((2.0 * unit(splitmix64(k)) - 1.0) * spec.init_scale); break;
      case TableInit::kNormal: {  // Box-Muller on two independent uniforms
        const double u1 = unit(splitmix64(k)), u2 = unit(splitmix64(k ^ 0x5851f42d4c957f2dULL));
        out[c] =
            static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2) * spec.init_scale);
        break;
      }
    }
  }
}

void check_table_specs(const std::vector<TableSpec>& tables) {
  std::set<std::string> names;
  for (const TableSpec& t : tables) {
    if (t.name.empty()) throw Error("embedding table: a table has no name");
    if (!names.insert(t.name).second) throw Error("embedding table '" + t.name + "' is declared twice");
    if (t.rows == 0 || t.dim == 0) throw Error("embedding table " + describe_table(t) + ": rows and dim must be > 0");
    if (t.rows > (uint64_t(1) << 62) / t.dim) throw Error("embedding table " + describe_table(t) + " is too large");
    if (t.expire_after < 0) {
      throw Error("embedding table " + describe_table(t) + ": expire_after " + std::to_string(t.expire_after) +
                  " is negative");
    }
    if (!t.hashed && (t.admit_after > 0 || t.expire_after > 0)) {
      throw Error("embedding table " + describe_table(t) + ": admission and expiry are for hashed tables");
    }
    if (!(t.init_scale >= 0.0f) || !std::isfinite(t.init_scale)) {
      throw Error("embedding table " + describe_table(t) + ": init scale " + std::to_string(t.init_scale) +
                  " is not a finite number >= 0");
    }
  }
}

std::string describe_table(const TableSpec& spec) {
  return spec.name + (spec.hashed ? " (hashed, up to " : " (") + std::to_string(spec.rows) + " x " +
         std::to_string(spec.dim) + ")";
}

}  // namespace pshard
