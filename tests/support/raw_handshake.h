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
// `wait_s` (or no connect succeeded: a failed one is tried again for 10 s). `connected`, when given, is called once the
// connect returned (whether it succeeded or not): callers that need an order of arrival start the next peer then.
// `hold`, when given, keeps the connection open while it returns true (for at most a minute): `wait_s` counts from when
// it no longer does, so a peer of a slow-to-gather crowd does not give up before the last one arrived.
double stalled_handshake(const std::string& endpoint, size_t frame_bytes, size_t body_bytes, double wait_s = 30,
                         const std::function<void()>& connected = nullptr, const std::function<bool()>& hold = nullptr);

}  // namespace pshard::testing
