// Tensors: owning storage, views, reshape and narrow, and errors on bad shapes.
#include "models/tensor.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "models/cpu/cpu_backend.h"

namespace pshard::models {
namespace {

TEST(Tensor, OwningTensorHasShapeAndNumel) {
  CpuBackend cpu(1);
  Tensor t(cpu, {2, 3, 4, 5});
  EXPECT_EQ(t.numel(), 120);
  EXPECT_EQ(t.ndim(), 4);
  EXPECT_EQ(t.dim(1), 3);
  EXPECT_EQ(t.dim(-1), 5);
  EXPECT_TRUE(t.owning());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(i);
  Tensor copy = t;  // shallow
  EXPECT_EQ(copy.data(), t.data());
}

TEST(Tensor, ReshapeAndNarrowAreViews) {
  CpuBackend cpu(1);
  Tensor t(cpu, {4, 6});
  for (int64_t i = 0; i < 24; ++i) t.data()[i] = static_cast<float>(i);
  Tensor r = t.reshape({2, 3, 4});
  EXPECT_EQ(r.data(), t.data());
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 3, 4}));
  Tensor rows = t.narrow(1, 2);
  EXPECT_EQ(rows.shape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(rows.numel(), 12);
  EXPECT_FLOAT_EQ(rows.data()[0], 6.0f);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(t.narrow(3, 2), Error);
  EXPECT_THROW(t.dim(2), Error);
}

TEST(Tensor, ViewOfHostMemoryKeepsItsPointer) {
  std::vector<float> host(10, 1.5f);
  Tensor v = Tensor::view(host.data(), {2, 5});
  EXPECT_FALSE(v.owning());
  EXPECT_EQ(v.data(), host.data());
  EXPECT_EQ(shape_to_string(v.shape()), "[2, 5]");
  EXPECT_THROW(shape_numel({2, -1}), Error);
}

TEST(Tensor, StorageOutlivesTheOwnerThroughViews) {
  CpuBackend cpu(1);
  Tensor view;
  {
    Tensor t(cpu, {8});
    for (int i = 0; i < 8; ++i) t.data()[i] = static_cast<float>(i);
    view = t.reshape({2, 4});
  }
  EXPECT_FLOAT_EQ(view.data()[7], 7.0f);
}

TEST(ReusableBuffer, AllocatesOnlyWhenTooSmall) {
  CpuBackend cpu(1);
  ReusableBuffer b;
  float* p1 = b.get(cpu, {64, 10}).data();
  float* p2 = b.get(cpu, {32, 10}).data();
  EXPECT_EQ(p1, p2);
  Tensor big = b.get(cpu, {128, 10});
  EXPECT_EQ(big.numel(), 1280);
  EXPECT_EQ(b.get(cpu, {64, 10}).data(), big.data());
}

}  // namespace
}  // namespace pshard::models
