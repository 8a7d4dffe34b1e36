// Sending and receiving multipart ZeroMQ messages as vectors of frames.
#pragma once

#include <cstddef>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/protocol/codec.h"

namespace pshard::transport {

// Sends every frame (all but the last with SNDMORE). Frames are moved into ZeroMQ, so
// zero-copy bodies are released by their free callback once sent. Returns false when the
// socket would block (only with dontwait); throws zmq::error_t on other errors.
bool send_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames,
                 zmq::send_flags last = zmq::send_flags::none);

// Receives one whole multipart message without blocking. Returns false when none is
// waiting. `frames` is cleared first.
bool recv_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames);

// A frame holding a copy of `bytes` (headers: small).
zmq::message_t copy_frame(const std::string& bytes);
// A frame that points at caller memory; the caller keeps it alive until ZeroMQ has sent it.
zmq::message_t borrowed_frame(const void* data, size_t size);

// Views of frames[first..] for protocol::decode.
std::vector<protocol::FrameView> views(const std::vector<zmq::message_t>& frames, size_t first);

}  // namespace pshard::transport
