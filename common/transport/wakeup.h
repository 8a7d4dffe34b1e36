// A file descriptor another thread can poke to wake a zmq::poll loop (Linux eventfd).
#pragma once

namespace pshard::transport {

// The loop polls fd() for POLLIN next to its sockets; producers call notify() after queueing work.
//
//   Wakeup wake;
//   zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake.fd(), ZMQ_POLLIN, 0}};
//   zmq::poll(items, 2, timeout);
//   if (items[1].revents & ZMQ_POLLIN) { wake.drain(); take_queued_work(); }
class Wakeup {
 public:
  Wakeup();  // throws pshard::Error when eventfd fails
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  int fd() const { return fd_; }
  void notify();  // thread-safe, never blocks
  void drain();   // clears pending notifications

 private:
  int fd_ = -1;
};

}  // namespace pshard::transport
