// The asynchronous transfer API of Backend (begin_download / begin_upload / wait_transfer, HostBuffer) on the CPU
// backend and, when a GPU is present, on the CUDA backend.
#include "models/transfer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "models/device.h"
#include "tests/models/gpu/gpu_compare.h"

namespace pshard::models {
namespace {

using gpu_test::Array;
using gpu_test::random_floats;

std::vector<std::unique_ptr<Backend>> backends() {
  std::vector<std::unique_ptr<Backend>> all;
  all.push_back(make_cpu_backend(1));
  if (cuda_device_count() > 0) all.push_back(make_cuda_backend(0));
  return all;
}

TEST(Transfer, DownloadAfterQueuedComputeSeesItsResult) {
  for (auto& b : backends()) {
    const int64_t n = 1 << 20;
    const auto x = random_floats(n, 1), y0 = random_floats(n, 2);
    Array xs(*b, x), ys(*b, y0);
    HostBuffer staging(*b);
    float* host = staging.get(n);
    ASSERT_GE(staging.capacity(), static_cast<size_t>(n));
    b->axpy(n, 2.0f, xs.get(), ys.get());  // queued compute the download must wait for
    const auto t = b->begin_download(host, ys.get(), n * sizeof(float));
    b->wait_transfer(t, 30.0);
    b->wait_transfer(t, 30.0);  // a second wait returns at once
    for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(host[i], y0[i] + 2.0f * x[i]) << b->describe() << " at " << i;
  }
}

TEST(Transfer, UploadIsSeenByLaterCompute) {
  for (auto& b : backends()) {
    const int64_t n = 1 << 16;
    const auto w = random_floats(n, 3);
    Array dst(*b, n, -1.0f), out(*b, n);
    HostBuffer staging(*b);
    float* host = staging.get(n);
    std::memcpy(host, w.data(), n * sizeof(float));
    const auto t = b->begin_upload(dst.get(), host, n * sizeof(float));
    b->add(n, dst.get(), dst.get(), out.get());  // queued after the upload: must read the new values
    b->wait_transfer(t, 30.0);
    const auto got = out.host();
    for (int64_t i = 0; i < n; i += 101) ASSERT_EQ(got[i], 2.0f * w[i]) << b->describe() << " at " << i;
  }
}

TEST(Transfer, ManyTicketsInFlightAndHostBufferReuse) {
  for (auto& b : backends()) {
    const int64_t n = 1000, parts = 16;
    const auto x = random_floats(n * parts, 4);
    Array xs(*b, x);
    HostBuffer staging(*b);
    float* first = staging.get(n * parts);
    EXPECT_EQ(staging.get(n), first) << "a smaller request reuses the buffer";
    std::vector<Backend::TransferTicket> tickets;
    for (int64_t p = 0; p < parts; ++p) {
      tickets.push_back(b->begin_download(first + p * n, xs.get() + p * n, n * sizeof(float)));
    }
    for (auto t : tickets) b->wait_transfer(t, 30.0);
    EXPECT_EQ(std::vector<float>(first, first + n * parts), x) << b->describe();
  }
}

TEST(Transfer, TransferDoneNeverBlocksAndTurnsTrueWhenTheCopyIsDone) {
  for (auto& b : backends()) {
    const int64_t n = 1 << 22;
    const auto x = random_floats(n, 5), y0 = random_floats(n, 6);
    Array xs(*b, x), ys(*b, y0);
    HostBuffer staging(*b);
    float* host = staging.get(n);
    b->axpy(n, 3.0f, xs.get(), ys.get());
    const auto t = b->begin_download(host, ys.get(), n * sizeof(float));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int64_t polls = 0;
    while (!b->transfer_done(t)) {
      ++polls;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << b->describe() << ": the copy never finished";
    }
    for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(host[i], y0[i] + 3.0f * x[i]) << b->describe() << " at " << i;
    EXPECT_TRUE(b->transfer_done(t)) << "a finished ticket stays done";
    b->wait_transfer(t, 1.0);  // and counts as waited for
    if (b->host_accessible()) {
      EXPECT_EQ(polls, 0) << "CPU copies are done when begun";
    }
  }
}

TEST(Transfer, UnknownTicketIsAnError) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "CPU tickets are always complete; needs a GPU";
  auto b = make_cuda_backend(0);
  EXPECT_THROW(b->wait_transfer(987654321, 1.0), Error);
  EXPECT_THROW(b->transfer_done(987654321), Error);
}

}  // namespace
}  // namespace pshard::models
