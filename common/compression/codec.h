// Payload encodings of float32 slices (cluster.compression, cluster.pull_precision): one Codec per file in this folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/protocol/pshard.capnp.h"

namespace pshard::compression {

using wire::Encoding;

// What check() found wrong with received bytes: the length (wrongLength on the wire) or the contents (badEncoding).
struct CheckResult {
  enum Kind { kOk, kWrongLength, kBadContent } kind = kOk;
  std::string why;
  bool ok() const { return kind == kOk; }
};

// One encoding. encode() is for senders (a codec with a random state is not thread-safe); check() and decode() are
// pure and const: a receiver checks a frame once, then decodes it.
//
//   std::unique_ptr<Codec> c = make_codec({Encoding::BF16});
//   std::vector<uint8_t> bytes(c->max_encoded_bytes(n));
//   bytes.resize(c->encode(grad, n, bytes.data()));
//   if (c->check(bytes.data(), bytes.size(), n).ok()) c->decode(bytes.data(), bytes.size(), n, out);
class Codec {
 public:
  virtual ~Codec() = default;
  virtual Encoding encoding() const = 0;
  // The most bytes encode() writes for n values.
  virtual size_t max_encoded_bytes(size_t n) const = 0;
  // Encodes n values into `out` (max_encoded_bytes(n) bytes); returns the bytes written.
  virtual size_t encode(const float* in, size_t n, uint8_t* out) = 0;
  // Whether `bytes` bytes at `in` are a valid encoding of n values (reads them unaligned).
  virtual CheckResult check(const uint8_t* in, size_t bytes, size_t n) const = 0;
  // Decodes a checked encoding into n floats; a sparse encoding leaves zeros where it sent nothing.
  virtual void decode(const uint8_t* in, size_t bytes, size_t n, float* out) const = 0;
  // True when a decoded value can differ from the encoded one by more than rounding (sparse, 1-bit): such codecs
  // keep an error-feedback residual on the worker (ErrorFeedback).
  virtual bool drops_information() const = 0;
  // A sender's state between encodes (randomk's sampler), for checkpoints; stateless codecs keep none. load_state()
  // takes what save_state() gave, or throws an Error.
  virtual std::string save_state() const { return {}; }
  virtual void load_state(const std::string& state) { (void)state; }
};

struct CodecParams {
  Encoding encoding = Encoding::NONE;
  double ratio = 0.01;  // topk/randomk: the fraction of a slice's values sent (at least one)
  uint64_t seed = 0;    // randomk: the sample's seed
};

// The codec of `p.encoding`; an Error for an encoding this build does not know.
std::unique_ptr<Codec> make_codec(const CodecParams& p);

// For receivers: check() and decode() of `encoding` without a codec of their own (thread-safe).
CheckResult check_encoded(Encoding encoding, const void* data, size_t bytes, size_t n);
void decode_encoded(Encoding encoding, const void* data, size_t bytes, size_t n, float* out);

// "none", "fp16", ...; and back (false for an unknown name).
const char* encoding_name(Encoding encoding);
bool encoding_from_name(const std::string& name, Encoding* out);
// True for an enumerant this build knows (a peer may send any 16-bit value).
bool known_encoding(Encoding encoding);

// The codecs, one per file (make_codec picks among them).
std::unique_ptr<Codec> make_none_codec();
std::unique_ptr<Codec> make_fp16_codec();
std::unique_ptr<Codec> make_bf16_codec();
std::unique_ptr<Codec> make_topk_codec(double ratio);
std::unique_ptr<Codec> make_randomk_codec(double ratio, uint64_t seed);
std::unique_ptr<Codec> make_onebit_codec();

}  // namespace pshard::compression
