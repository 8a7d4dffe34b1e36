// Multipart send/receive helpers.
#include "common/transport/frames.h"

namespace pshard::transport {

bool send_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames, zmq::send_flags last) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const bool is_last = i + 1 == frames.size();
    zmq::send_flags flags = is_last ? last : (zmq::send_flags::sndmore | (last & zmq::send_flags::dontwait));
    auto sent = socket.send(frames[i], flags);
    if (!sent) return false;
  }
  return true;
}

bool recv_frames(zmq::socket_t& socket, std::vector<zmq::message_t>& frames) {
  frames.clear();
  zmq::message_t first;
  if (!socket.recv(first, zmq::recv_flags::dontwait)) return false;
  bool more = first.more();
  frames.push_back(std::move(first));
  while (more) {
    zmq::message_t part;
    // The rest of a multipart message is already here once its first frame arrived.
    (void)socket.recv(part, zmq::recv_flags::none);
    more = part.more();
    frames.push_back(std::move(part));
  }
  return true;
}

zmq::message_t copy_frame(const std::string& bytes) { return zmq::message_t(bytes.data(), bytes.size()); }

namespace {
void no_free(void*, void*) {}
}  // namespace

zmq::message_t borrowed_frame(const void* data, size_t size) {
  return zmq::message_t(const_cast<void*>(data), size, &no_free, nullptr);
}

std::vector<protocol::FrameView> views(const std::vector<zmq::message_t>& frames, size_t first) {
  std::vector<protocol::FrameView> out;
  for (size_t i = first; i < frames.size(); ++i) out.push_back({frames[i].data(), frames[i].size()});
  return out;
}

}  // namespace pshard::transport
