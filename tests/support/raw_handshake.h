// A raw TCP peer that starts a ZeroMQ (ZMTP 3.0 PLAIN) handshake and never finishes it: what an unauthenticated
// connection can make a binding socket hold.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace pshard::testing {

// Connects to `endpoint` ("tcp://127.0.0.1:PORT"), sends a PLAIN greeting and the head of a first command frame
// that announces `frame_bytes`, then `body_bytes` of its body (at most frame_bytes - 1), and waits for the target
// to close the connection. Returns the seconds from the connect until it did, or -1 when it did not within
// `wait_s` (or the connect failed). `connected`, when given, is called once the connect returned (whether it
// succeeded or not): callers that need an order of arrival start the next peer then.
double stalled_handshake(const std::string& endpoint, size_t frame_bytes, size_t body_bytes, double wait_s = 30,
                         const std::function<void()>& connected = nullptr);

}  // namespace pshard::testing
