// SlotCopier (slot_copier.h): the copier thread's copies into the push slots.
#include "worker/client/slot_copier.h"

#include <utility>

#include "common/error.h"
#include "common/util/signals.h"

namespace pshard {

SlotCopier::SlotCopier(Client client) : client_(client) {
  thread_ = start_thread([this] { loop(); });
}

SlotCopier::~SlotCopier() { stop(); }

void SlotCopier::submit(std::vector<Part>& parts) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(parts));
  }
  cv_.notify_one();
}

void SlotCopier::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SlotCopier::loop() {
  for (;;) {
    std::vector<Part> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::vector<Part> ready;
    for (Part& p : job) {
      try {
        for (const auto& [id, src] : p.slot_copies) {
          client_.links->write_push(p.server, id, src, client_.layout->slice(id).length, p.deadline);
        }
        p.slot_copies.clear();
        ready.push_back(std::move(p));
      } catch (const Error& e) {
        p.op->part_done(e.what());
      }
    }
    client_.poller->send(ready);
  }
}

}  // namespace pshard
