// protocol::decode on encoded payloads: each encoding's round trip through the header, and the refusals
// (wrongLength for a size that does not match, badEncoding for an encoding a message may not use or bad contents).
#include <gtest/gtest.h>

#include <cstring>

#include "common/compression/codec.h"
#include "common/protocol/codec.h"

namespace pshard::protocol {
namespace {

constexpr uint64_t kLength = 100;

Message request(MessageType type, Encoding e) {
  Message m;
  m.type = type;
  m.request_id = 5;
  m.job_token = "tok";
  m.sender_role = Role::WORKER;
  m.step = 2;
  m.layout_fingerprint = 77;
  m.keys.push_back({0, 0, 0, kLength, DType::FLOAT32, e});
  return m;
}

struct Encoded {
  std::string header;
  std::vector<uint8_t> payload;
  bool with_payload = true;  // false: a request without payload frames (pull)
  Decoded decode_it() const {
    std::vector<FrameView> v{{header.data(), header.size()}};
    if (with_payload) v.push_back({payload.data(), payload.size()});
    return decode(v.data(), v.size());
  }
};

Encoded encoded_push(Encoding e, MessageType type = MessageType::PUSH) {
  std::vector<float> g(kLength);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.01f * static_cast<float>(i) - 0.3f;
  auto codec = compression::make_codec({e, 0.05, 1});
  Encoded out{encode_header(request(type, e)), std::vector<uint8_t>(codec->max_encoded_bytes(kLength)), true};
  out.payload.resize(codec->encode(g.data(), kLength, out.payload.data()));
  return out;
}

TEST(EncodingCheck, EveryCodecIsAcceptedInAPush) {
  for (Encoding e :
       {Encoding::NONE, Encoding::FP16, Encoding::BF16, Encoding::TOPK, Encoding::RANDOMK, Encoding::ONEBIT}) {
    Decoded d = encoded_push(e).decode_it();
    ASSERT_TRUE(d.ok) << compression::encoding_name(e) << ": " << d.error;
    EXPECT_EQ(d.message.keys[0].encoding, e);
  }
}

TEST(EncodingCheck, WrongLengthIsRefusedAsSuch) {
  Encoded m = encoded_push(Encoding::BF16);
  m.payload.pop_back();
  Decoded d = m.decode_it();
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.code, ErrorCode::WRONG_LENGTH);
  EXPECT_NE(d.error.find("key 0 (tensor 0, slice 0): bf16 payload of 199 bytes, expected 200"), std::string::npos)
      << d.error;
}

TEST(EncodingCheck, SparseIndexOutOfRangeIsBadEncoding) {
  Encoded m = encoded_push(Encoding::TOPK, MessageType::PUSH_PULL);
  const uint32_t past_the_end = kLength;
  std::memcpy(m.payload.data() + 4 * 4, &past_the_end, 4);  // the 5th and last index
  Decoded d = m.decode_it();
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
  EXPECT_NE(d.error.find("topk index 4 is 100, out of range for 100 values"), std::string::npos) << d.error;
}

TEST(EncodingCheck, UnknownEncodingIsBadEncoding) {
  Encoded m = encoded_push(Encoding::FP16);
  m.header = encode_header(request(MessageType::PUSH, static_cast<Encoding>(9)));
  Decoded d = m.decode_it();
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
  EXPECT_NE(d.error.find("encoding unknown(9) is not allowed in push"), std::string::npos) << d.error;
}

TEST(EncodingCheck, InitMustBeFloat32) {
  Message m = request(MessageType::INIT, Encoding::FP16);
  m.tensors = {{"w", kLength}};
  m.slice_bytes = 4096;
  m.num_servers = 1;
  Encoded e = encoded_push(Encoding::FP16);
  e.header = encode_header(m);
  Decoded d = e.decode_it();
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
  EXPECT_NE(d.error.find("encoding fp16 is not allowed in init"), std::string::npos) << d.error;
}

TEST(EncodingCheck, WeightsMayOnlyBeDense) {
  Encoded ok = encoded_push(Encoding::BF16);
  ok.header = encode_header(request(MessageType::WEIGHTS, Encoding::BF16));
  EXPECT_TRUE(ok.decode_it().ok);
  Encoded bad = encoded_push(Encoding::TOPK);
  bad.header = encode_header(request(MessageType::WEIGHTS, Encoding::TOPK));
  Decoded d = bad.decode_it();
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
}

TEST(EncodingCheck, PullEncodingOnlyOnReadsAndOnlyDense) {
  Message pull = request(MessageType::PULL, Encoding::NONE);
  pull.pull_encoding = Encoding::BF16;
  Encoded e{encode_header(pull), {}, false};
  Decoded d = e.decode_it();
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.pull_encoding, Encoding::BF16);

  pull.pull_encoding = Encoding::ONEBIT;
  e.header = encode_header(pull);
  d = e.decode_it();
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
  EXPECT_NE(d.error.find("pull encoding onebit is not allowed in pull"), std::string::npos) << d.error;

  Encoded push = encoded_push(Encoding::NONE);
  Message m = request(MessageType::PUSH, Encoding::NONE);
  m.pull_encoding = Encoding::FP16;  // a push reads nothing back
  push.header = encode_header(m);
  EXPECT_EQ(push.decode_it().code, ErrorCode::BAD_ENCODING);
}

TEST(EncodingCheck, KeysWithoutPayloadAreNone) {
  Encoded e{encode_header(request(MessageType::PULL, Encoding::FP16)), {}, false};
  Decoded d = e.decode_it();
  EXPECT_EQ(d.code, ErrorCode::BAD_ENCODING);
  EXPECT_STREQ(error_code_name(d.code), "badEncoding");
}

}  // namespace
}  // namespace pshard::protocol
