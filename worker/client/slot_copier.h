// SlotCopier: a KV client's copier thread. zpush's copies into the push slots of a server on this host (ServerLinks)
// run on it, not on the caller's thread, as the kernel's copy of a TCP payload runs on ZeroMQ's I/O thread: a
// trainer's backward goes on while its gradients are copied. A request's parts are copied and sent in the order they
// were submitted.
//
//   SlotCopier copier({&layout, &links, &poller});
//   copier.submit(parts);  // the parts whose slot_copies are filled, then sent by the poller
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/keys/slice_layout.h"
#include "worker/client/request_parts.h"
#include "worker/client/request_poller.h"
#include "worker/client/server_links.h"

namespace pshard {

class SlotCopier {
 public:
  using Part = kv_client_detail::Part;
  // What the copier uses of its client; each outlives it.
  struct Client {
    const SliceLayout* layout = nullptr;
    ServerLinks* links = nullptr;
    RequestPoller* poller = nullptr;
  };

  explicit SlotCopier(Client client);
  // stop(), if it was not called.
  ~SlotCopier();
  SlotCopier(const SlotCopier&) = delete;
  SlotCopier& operator=(const SlotCopier&) = delete;

  // One request's parts: each part's slot copies, then the part to the poller.
  void submit(std::vector<Part>& parts);
  // Copies and sends what was submitted, then ends the thread (a copy waiting for a busy slot gives up once the
  // links are abandoned: ServerLinks::abandon).
  void stop();

 private:
  void loop();

  const Client client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Part>> queue_;  // mu_
  bool stopping_ = false;                // mu_
  std::thread thread_;                   // last: started once everything above exists
};

}  // namespace pshard
