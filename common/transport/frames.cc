// Multipart send/receive helpers.
#include "common/transport/frames.h"

#include <cerrno>

namespace pshard::transport {
namespace {

// A send or receive that a signal interrupted is tried again: the message is still whole. pshard's own threads never
// take signals (common/util/signals.h), but a library's caller may get one on its thread, as Python does.
template <class Call>
auto again_if_interrupted(Call call) {
  for (;;) {
    try {
      return call();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
}

void no_free(void*, void*) {}

}  // namespace

bool send_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames, zmq::send_flags last) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const bool is_last = i + 1 == frames.size();
    zmq::send_flags flags = is_last ? last : (zmq::send_flags::sndmore | (last & zmq::send_flags::dontwait));
    auto sent = again_if_interrupted([&] { return socket.send(frames[i], flags); });
    if (!sent) return false;
  }
  return true;
}

bool recv_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames) {
  frames.clear();
  zmq::message_t first;
  if (!again_if_interrupted([&] { return socket.recv(first, zmq::recv_flags::dontwait); })) return false;
  bool more = first.more();
  frames.push_back(std::move(first));
  while (more) {
    zmq::message_t part;
    // The rest of a multipart message is already here once its first frame arrived.
    (void)again_if_interrupted([&] { return socket.recv(part, zmq::recv_flags::none); });
    more = part.more();
    frames.push_back(std::move(part));
  }
  return true;
}

zmq::message_t copy_frame(const std::string& bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

zmq::message_t borrowed_frame(const void* data, size_t size) {
  return zmq::message_t(const_cast<void*>(data), size, &no_free, nullptr);
}

std::vector<protocol::FrameView> views(const std::vector<zmq::message_t>& frames, size_t first) {
  std::vector<protocol::FrameView> out;
  for (size_t i = first; i < frames.size(); ++i) out.push_back({frames[i].data(), frames[i].size()});
  return out;
}

}  // namespace pshard::transport
