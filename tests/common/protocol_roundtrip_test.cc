// A Cap'n Proto header built, sent over a ZeroMQ socket pair with a raw
// payload frame, and read back field by field.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/pshard.capnp.h"

namespace {

TEST(ProtocolRoundTrip, HeaderAndPayloadSurviveZmqPair) {
  zmq::context_t ctx;
  zmq::socket_t a(ctx, zmq::socket_type::pair);
  zmq::socket_t b(ctx, zmq::socket_type::pair);
  a.bind("inproc://roundtrip");
  b.connect("inproc://roundtrip");
  b.set(zmq::sockopt::rcvtimeo, 5000);

  std::vector<float> payload = {1.5f, -2.0f, 3.25f, 1e-7f};
  {
    capnp::MallocMessageBuilder builder;
    auto h = builder.initRoot<pshard::wire::Header>();
    h.setType(pshard::wire::MessageType::PING);
    h.setRequestId(0x0123456789abcdefULL);
    h.setJobToken("job-token-42");
    h.setSenderRole(pshard::wire::Role::WORKER);
    h.setSenderRank(7);
    h.setStep(-3);
    auto keys = h.initKeys(1);
    keys[0].setTensor(2);
    keys[0].setSlice(5);
    keys[0].setOffset(1 << 20);
    keys[0].setLength(payload.size());
    keys[0].setDtype(pshard::wire::DType::FLOAT32);
    kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
    auto bytes = words.asBytes();
    a.send(zmq::buffer(bytes.begin(), bytes.size()), zmq::send_flags::sndmore);
    a.send(zmq::buffer(payload.data(), payload.size() * sizeof(float)), zmq::send_flags::none);
  }

  zmq::message_t header_frame, payload_frame;
  ASSERT_TRUE(b.recv(header_frame));
  ASSERT_TRUE(header_frame.more());
  ASSERT_TRUE(b.recv(payload_frame));
  EXPECT_FALSE(payload_frame.more());

  ASSERT_EQ(header_frame.size() % sizeof(capnp::word), 0u);
  std::vector<capnp::word> aligned(header_frame.size() / sizeof(capnp::word));
  std::memcpy(aligned.data(), header_frame.data(), header_frame.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(aligned.data(), aligned.size()));
  auto h = reader.getRoot<pshard::wire::Header>();
  EXPECT_EQ(h.getType(), pshard::wire::MessageType::PING);
  EXPECT_EQ(h.getRequestId(), 0x0123456789abcdefULL);
  EXPECT_EQ(std::string(h.getJobToken().cStr()), "job-token-42");
  EXPECT_EQ(h.getSenderRole(), pshard::wire::Role::WORKER);
  EXPECT_EQ(h.getSenderRank(), 7u);
  EXPECT_EQ(h.getStep(), -3);
  ASSERT_EQ(h.getKeys().size(), 1u);
  auto k = h.getKeys()[0];
  EXPECT_EQ(k.getTensor(), 2u);
  EXPECT_EQ(k.getSlice(), 5u);
  EXPECT_EQ(k.getOffset(), 1u << 20);
  EXPECT_EQ(k.getLength(), payload.size());
  EXPECT_EQ(k.getDtype(), pshard::wire::DType::FLOAT32);

  ASSERT_EQ(payload_frame.size(), payload.size() * sizeof(float));
  std::vector<float> got(payload.size());
  std::memcpy(got.data(), payload_frame.data(), payload_frame.size());
  EXPECT_EQ(got, payload);
}

}  // namespace
