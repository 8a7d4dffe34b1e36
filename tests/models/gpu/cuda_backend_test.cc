// Every CudaBackend operation against the CPU reference on random inputs (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/backend.h"
#include "models/cpu/cpu_backend.h"
#include "models/device.h"
#include "models/transfer.h"
#include "tests/models/gpu/gpu_compare.h"

namespace pshard::models {
namespace {

using gpu_test::absolute;
using gpu_test::Array;
using gpu_test::expect_close;
using gpu_test::expect_within_sum_rounding;
using gpu_test::random_floats;

constexpr double kRtol = 1e-4;

class CudaVsCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    PSHARD_REQUIRE_GPU();
    // Operation by operation, so every activation NCHW as on the GPU (the CPU's blocked channels are compared with
    // NCHW in blocked_layout_test).
    cpu_ = std::make_unique<CpuBackend>(2, CpuKernels::kOneDnn, /*block_channels=*/false);
    gpu_ = make_cuda_backend(0, /*allow_tf32=*/false);
  }
  std::unique_ptr<Backend> cpu_, gpu_;
};

TEST(CudaBackendAvailability, WithoutGpuMakeCudaBackendIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: " << describe_cuda_devices();
  try {
    make_cuda_backend(0);
    FAIL() << "make_cuda_backend succeeded without a GPU";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda backend"), std::string::npos) << what;
    // The reason, whichever applies to this machine (models/cuda/device.cu; cuda_unavailable.cc without CUDA).
    bool named = false;
    for (const char* reason : {"no NVIDIA driver", "driver is too old", "CUDA_VISIBLE_DEVICES", "finds no CUDA device",
                               "runtime cannot start", "built without CUDA"}) {
      named = named || what.find(reason) != std::string::npos;
    }
    EXPECT_TRUE(named) << what;
  }
}

TEST_F(CudaVsCpu, NonexistentDeviceIsAnError) {
  EXPECT_THROW(make_cuda_backend(cuda_device_count()), Error);
  EXPECT_THROW(make_cuda_backend(-1), Error);
  EXPECT_NE(gpu_->describe().find("cuda:0"), std::string::npos) << gpu_->describe();
  EXPECT_FALSE(gpu_->host_accessible());
}

TEST_F(CudaVsCpu, MemoryFillCopyRoundTrip) {
  const auto x = random_floats(1000, 1);
  Array a(*gpu_, x), b(*gpu_, 1000);
  gpu_->copy(b.get(), a.get(), 1000);
  EXPECT_EQ(b.host(), x);
  gpu_->fill(a.get() + 10, 100, 2.5f);
  std::vector<float> want = x;
  std::fill(want.begin() + 10, want.begin() + 110, 2.5f);
  EXPECT_EQ(a.host(), want);
  float* ws = gpu_->workspace(1 << 20);
  EXPECT_NE(ws, nullptr);
  gpu_->fill(ws, 1 << 20, 1.0f);  // the workspace is usable device memory
  gpu_->synchronize();
}

// An unfinished transfer answers cudaEventQuery with "not ready", which the runtime also keeps as the thread's last
// error: wait_transfer must not leave it there, or the next kernel launch check (cudaGetLastError) throws it.
TEST_F(CudaVsCpu, WaitingForATransferLeavesNoErrorForTheNextKernel) {
  const size_t n = size_t{32} << 20;  // 128 MiB: the first queries find the copy unfinished
  HostBuffer host(*gpu_);
  float* h = host.get(n);
  Array d(*gpu_, n, 2.0f);
  for (int round = 0; round < 3; ++round) {
    const Backend::TransferTicket t = gpu_->begin_download(h, d.get(), n * sizeof(float));
    gpu_->wait_transfer(t, 60.0);
    EXPECT_NO_THROW(gpu_->fill(d.get(), 1024, 3.0f)) << "round " << round;  // a launch, then cudaGetLastError
  }
  gpu_->synchronize();
  EXPECT_EQ(h[0], 3.0f);  // the fill of round 0, downloaded in round 1
  EXPECT_EQ(h[n - 1], 2.0f);
}

TEST_F(CudaVsCpu, ElementwiseAxpyAddMultiply) {
  const int64_t n = 100003;
  const auto x = random_floats(n, 2), y = random_floats(n, 3);
  for (int op = 0; op < 3; ++op) {
    Array xc(*cpu_, x), yc(*cpu_, y), oc(*cpu_, n), xg(*gpu_, x), yg(*gpu_, y), og(*gpu_, n);
    const char* name = op == 0 ? "axpy" : op == 1 ? "add" : "multiply";
    if (op == 0) {
      cpu_->axpy(n, -0.75f, xc.get(), yc.get());
      gpu_->axpy(n, -0.75f, xg.get(), yg.get());
      expect_close(yc.host(), yg.host(), kRtol, name);
    } else if (op == 1) {
      cpu_->add(n, xc.get(), yc.get(), oc.get());
      gpu_->add(n, xg.get(), yg.get(), og.get());
      expect_close(oc.host(), og.host(), kRtol, name);
    } else {
      cpu_->multiply(n, xc.get(), yc.get(), oc.get());
      gpu_->multiply(n, xg.get(), yg.get(), og.get());
      expect_close(oc.host(), og.host(), kRtol, name);
    }
  }
}

TEST_F(CudaVsCpu, GemmAllTransposesWithLeadingDimensions) {
  const int64_t m = 37, n = 53, k = 71;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      // Stored shapes (row-major) with 3 floats of padding per row.
      const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      const int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = n + 3;
      const auto a = random_floats(a_rows * lda, 10 + ta), b = random_floats(b_rows * ldb, 20 + tb);
      const auto c0 = random_floats(m * ldc, 30);
      Array ac(*cpu_, a), bc(*cpu_, b), cc(*cpu_, c0), ag(*gpu_, a), bg(*gpu_, b), cg(*gpu_, c0);
      cpu_->gemm(ta, tb, m, n, k, 0.5f, ac.get(), lda, bc.get(), ldb, 0.25f, cc.get(), ldc);
      gpu_->gemm(ta, tb, m, n, k, 0.5f, ag.get(), lda, bg.get(), ldb, 0.25f, cg.get(), ldc);
      expect_close(cc.host(), cg.host(), kRtol, "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
  }
}

TEST_F(CudaVsCpu, BiasAndBiasGrad) {
  for (int64_t inner : {int64_t{1}, int64_t{49}}) {
    const int64_t outer = 17, channels = 13, total = outer * channels * inner;
    const auto y = random_floats(total, 40), bias = random_floats(channels, 41);
    Array yc(*cpu_, y), bc(*cpu_, bias), dbc(*cpu_, channels), yg(*gpu_, y), bg(*gpu_, bias), dbg(*gpu_, channels);
    cpu_->add_bias(yc.get(), bc.get(), outer, channels, inner);
    gpu_->add_bias(yg.get(), bg.get(), outer, channels, inner);
    expect_close(yc.host(), yg.host(), kRtol, "add_bias inner " + std::to_string(inner));
    cpu_->bias_grad(yc.get(), outer, channels, inner, dbc.get());
    gpu_->bias_grad(yg.get(), outer, channels, inner, dbg.get());
    expect_close(dbc.host(), dbg.host(), kRtol, "bias_grad inner " + std::to_string(inner));
  }
}

TEST_F(CudaVsCpu, ReluForwardBackward) {
  const int64_t n = 5000;
  const auto x = random_floats(n, 50), dy = random_floats(n, 51);
  Array xc(*cpu_, x), yc(*cpu_, n), dyc(*cpu_, dy), dxc(*cpu_, n);
  Array xg(*gpu_, x), yg(*gpu_, n), dyg(*gpu_, dy), dxg(*gpu_, n);
  cpu_->relu_forward(xc.get(), yc.get(), n);
  gpu_->relu_forward(xg.get(), yg.get(), n);
  EXPECT_EQ(yc.host(), yg.host());
  cpu_->relu_backward(yc.get(), dyc.get(), dxc.get(), n);
  gpu_->relu_backward(yg.get(), dyg.get(), dxg.get(), n);
  EXPECT_EQ(dxc.host(), dxg.host());
}

TEST_F(CudaVsCpu, DropoutMasksAreIdenticalToTheCpu) {
  const int64_t n = 300007;
  const auto x = random_floats(n, 60);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    for (uint64_t counter : {uint64_t{0}, uint64_t{7}}) {
      Array xc(*cpu_, x), yc(*cpu_, n), mc(*cpu_, n), xg(*gpu_, x), yg(*gpu_, n), mg(*gpu_, n);
      cpu_->dropout_forward(xc.get(), yc.get(), mc.get(), n, p, 1234, counter);
      gpu_->dropout_forward(xg.get(), yg.get(), mg.get(), n, p, 1234, counter);
      const auto mask = mg.host();
      EXPECT_EQ(mc.host(), mask) << "p " << p << " counter " << counter;
      EXPECT_EQ(yc.host(), yg.host()) << "p " << p << " counter " << counter;
      int64_t kept = 0;
      for (float m : mask) kept += m != 0.0f;
      EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01);
    }
  }
}

TEST_F(CudaVsCpu, Conv2dForwardBackward) {
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad;
    bool bias, need_dx;
  };
  const std::vector<Case> cases = {{2, 3, 9, 11, 5, 3, 1, 1, true, true},
                                   {3, 4, 8, 8, 6, 5, 2, 2, true, true},
                                   {4, 16, 8, 8, 32, 1, 2, 0, false, true},
                                   {2, 1, 28, 28, 6, 5, 1, 0, true, false},
                                   {8, 16, 32, 32, 16, 3, 1, 1, false, true}};
  uint64_t seed = 70;
  for (const Case& c : cases) {
    const ConvShape s = ConvShape::make(c.n, c.c_in, c.h, c.w, c.c_out, c.k, c.stride, c.pad);
    const std::string name = "conv " + std::to_string(c.c_in) + "->" + std::to_string(c.c_out) + " k" +
                             std::to_string(c.k) + " s" + std::to_string(c.stride) + " p" + std::to_string(c.pad);
    const int64_t nx = s.n * s.c_in * s.h * s.w, nw = s.c_out * s.c_in * s.kh * s.kw,
                  ny = s.n * s.c_out * s.h_out * s.w_out;
    const auto x = random_floats(nx, seed++), w = random_floats(nw, seed++), b = random_floats(s.c_out, seed++),
               dy = random_floats(ny, seed++);
    Array xc(*cpu_, x), wc(*cpu_, w), bc(*cpu_, b), yc(*cpu_, ny), dyc(*cpu_, dy), dxc(*cpu_, nx), dwc(*cpu_, nw),
        dbc(*cpu_, s.c_out);
    Array xg(*gpu_, x), wg(*gpu_, w), bg(*gpu_, b), yg(*gpu_, ny), dyg(*gpu_, dy), dxg(*gpu_, nx), dwg(*gpu_, nw),
        dbg(*gpu_, s.c_out);
    // Every output is a sum of products: the same convolution of the absolute values gives each one's sum|terms|.
    Array xa(*cpu_, absolute(x)), wa(*cpu_, absolute(w)), ba(*cpu_, absolute(b)), dya(*cpu_, absolute(dy)),
        ya(*cpu_, ny), dxa(*cpu_, nx), dwa(*cpu_, nw), dba(*cpu_, s.c_out);
    cpu_->conv2d_forward(s, xa.get(), wa.get(), c.bias ? ba.get() : nullptr, ya.get());
    cpu_->conv2d_backward(s, xa.get(), wa.get(), dya.get(), c.need_dx ? dxa.get() : nullptr, dwa.get(),
                          c.bias ? dba.get() : nullptr);
    cpu_->conv2d_forward(s, xc.get(), wc.get(), c.bias ? bc.get() : nullptr, yc.get());
    gpu_->conv2d_forward(s, xg.get(), wg.get(), c.bias ? bg.get() : nullptr, yg.get());
    expect_within_sum_rounding(yc.host(), yg.host(), ya.host(), name + " forward");
    cpu_->conv2d_backward(s, xc.get(), wc.get(), dyc.get(), c.need_dx ? dxc.get() : nullptr, dwc.get(),
                          c.bias ? dbc.get() : nullptr);
    gpu_->conv2d_backward(s, xg.get(), wg.get(), dyg.get(), c.need_dx ? dxg.get() : nullptr, dwg.get(),
                          c.bias ? dbg.get() : nullptr);
    expect_within_sum_rounding(dwc.host(), dwg.host(), dwa.host(), name + " dw");
    if (c.bias) expect_within_sum_rounding(dbc.host(), dbg.host(), dba.host(), name + " db");
    if (c.need_dx) expect_within_sum_rounding(dxc.host(), dxg.host(), dxa.host(), name + " dx");
  }
}

TEST_F(CudaVsCpu, ConvPlansAreReusedAcrossBatchSizes) {
  // The same layer with two batch sizes and back: each geometry has its own cached plan; results stay right.
  uint64_t seed = 90;
  for (int64_t n : {4, 2, 4}) {
    const ConvShape s = ConvShape::make(n, 3, 10, 10, 4, 3, 1, 1);
    const int64_t nx = s.n * 3 * 100, nw = 4 * 3 * 9, ny = s.n * 4 * 100;
    const auto x = random_floats(nx, seed++), w = random_floats(nw, seed++);
    Array xc(*cpu_, x), wc(*cpu_, w), yc(*cpu_, ny), xg(*gpu_, x), wg(*gpu_, w), yg(*gpu_, ny);
    cpu_->conv2d_forward(s, xc.get(), wc.get(), nullptr, yc.get());
    gpu_->conv2d_forward(s, xg.get(), wg.get(), nullptr, yg.get());
    expect_close(yc.host(), yg.host(), kRtol, "conv batch " + std::to_string(n));
  }
}

TEST_F(CudaVsCpu, MaxPoolWithTiesGivesTheGradientToTheFirstMaximum) {
  for (auto [k, stride, pad] : std::vector<std::array<int64_t, 3>>{{2, 2, 0}, {3, 2, 1}, {3, 1, 1}}) {
    const PoolShape s = PoolShape::make(3, 4, 9, 10, k, stride, pad);
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.h_out * s.w_out;
    auto x = random_floats(nx, 100 + k);
    for (float& v : x) v = std::round(v * 2.0f);  // few distinct values: many ties (as after ReLU)
    const auto dy = random_floats(ny, 110 + k);
    Array xc(*cpu_, x), yc(*cpu_, ny), dyc(*cpu_, dy), dxc(*cpu_, nx);
    Array xg(*gpu_, x), yg(*gpu_, ny), dyg(*gpu_, dy), dxg(*gpu_, nx);
    cpu_->maxpool2d_forward(s, xc.get(), yc.get());
    gpu_->maxpool2d_forward(s, xg.get(), yg.get());
    EXPECT_EQ(yc.host(), yg.host()) << "maxpool k" << k;
    cpu_->maxpool2d_backward(s, xc.get(), yc.get(), dyc.get(), dxc.get());
    gpu_->maxpool2d_backward(s, xg.get(), yg.get(), dyg.get(), dxg.get());
    expect_close(dxc.host(), dxg.host(), kRtol, "maxpool backward k" + std::to_string(k));
  }
}

TEST_F(CudaVsCpu, AvgPoolForwardBackward) {
  for (auto [k, stride, pad] : std::vector<std::array<int64_t, 3>>{{2, 2, 0}, {3, 1, 1}, {8, 8, 0}}) {
    const PoolShape s = PoolShape::make(2, 5, 8, 8, k, stride, pad);
    const int64_t nx = s.n * s.c * s.h * s.w, ny = s.n * s.c * s.h_out * s.w_out;
    const auto x = random_floats(nx, 120 + k), dy = random_floats(ny, 130 + k);
    Array xc(*cpu_, x), yc(*cpu_, ny), dyc(*cpu_, dy), dxc(*cpu_, nx);
    Array xg(*gpu_, x), yg(*gpu_, ny), dyg(*gpu_, dy), dxg(*gpu_, nx);
    cpu_->avgpool2d_forward(s, xc.get(), yc.get());
    gpu_->avgpool2d_forward(s, xg.get(), yg.get());
    expect_close(yc.host(), yg.host(), kRtol, "avgpool k" + std::to_string(k));
    cpu_->avgpool2d_backward(s, dyc.get(), dxc.get());
    gpu_->avgpool2d_backward(s, dyg.get(), dxg.get());
    expect_close(dxc.host(), dxg.host(), kRtol, "avgpool backward k" + std::to_string(k));
  }
}

TEST_F(CudaVsCpu, BatchNormTrainEvalBackward) {
  for (auto [n, c, hw] : std::vector<std::array<int64_t, 3>>{{16, 8, 1}, {6, 5, 49}, {128, 16, 64}}) {
    const std::string name = "batchnorm n" + std::to_string(n) + " c" + std::to_string(c) + " hw" + std::to_string(hw);
    const int64_t total = n * c * hw;
    auto x = random_floats(total, 140);
    for (float& v : x) v = 3.0f * v + 1.5f;  // a mean and variance far from 0 and 1
    const auto gamma = random_floats(c, 141, 0.5f, 1.5f), beta = random_floats(c, 142), dy = random_floats(total, 143);
    const auto rm = random_floats(c, 144), rv = random_floats(c, 145, 0.5f, 2.0f);
    Array xc(*cpu_, x), gc(*cpu_, gamma), bc(*cpu_, beta), rmc(*cpu_, rm), rvc(*cpu_, rv), smc(*cpu_, c), sic(*cpu_, c),
        yc(*cpu_, total), dyc(*cpu_, dy), dxc(*cpu_, total), dgc(*cpu_, c), dbc(*cpu_, c);
    Array xg(*gpu_, x), gg(*gpu_, gamma), bg(*gpu_, beta), rmg(*gpu_, rm), rvg(*gpu_, rv), smg(*gpu_, c), sig(*gpu_, c),
        yg(*gpu_, total), dyg(*gpu_, dy), dxg(*gpu_, total), dgg(*gpu_, c), dbg(*gpu_, c);
    cpu_->batchnorm_forward_train(n, c, hw, xc.get(), gc.get(), bc.get(), 1e-5f, 0.1f, rmc.get(), rvc.get(), smc.get(),
                                  sic.get(), yc.get());
    gpu_->batchnorm_forward_train(n, c, hw, xg.get(), gg.get(), bg.get(), 1e-5f, 0.1f, rmg.get(), rvg.get(), smg.get(),
                                  sig.get(), yg.get());
    // y = gamma (x - mean) invstd + beta subtracts two numbers near 1.5 where x is near the mean: y there carries the
    // rounding of the statistics (checked against the CPU's below), not of the normalisation. So y is checked
    // against the normalisation recomputed in double with the GPU's own statistics, to a few roundings of its terms;
    // the statistics against the CPU's.
    const std::vector<float> mean_g = smg.host(), invstd_g = sig.host(), y_g = yg.host();
    std::vector<float> y_ref(static_cast<size_t>(total)), y_terms(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
      const size_t ch = static_cast<size_t>((i / hw) % c), k = static_cast<size_t>(i);
      y_ref[k] = static_cast<float>(
          static_cast<double>(gamma[ch]) * (x[k] - static_cast<double>(mean_g[ch])) * invstd_g[ch] + beta[ch]);
      y_terms[k] =
          std::fabs(gamma[ch]) * invstd_g[ch] * (std::fabs(x[k]) + std::fabs(mean_g[ch])) + std::fabs(beta[ch]);
    }
    expect_within_sum_rounding(y_ref, y_g, y_terms, name + " y (from the GPU's statistics)");
    expect_close(smc.host(), smg.host(), kRtol, name + " save_mean");
    expect_close(sic.host(), sig.host(), kRtol, name + " save_invstd");
    expect_close(rmc.host(), rmg.host(), kRtol, name + " running_mean");
    expect_close(rvc.host(), rvg.host(), kRtol, name + " running_var");
    cpu_->batchnorm_backward(n, c, hw, xc.get(), dyc.get(), gc.get(), smc.get(), sic.get(), dxc.get(), dgc.get(),
                             dbc.get());
    gpu_->batchnorm_backward(n, c, hw, xg.get(), dyg.get(), gg.get(), smg.get(), sig.get(), dxg.get(), dgg.get(),
                             dbg.get());
    expect_close(dxc.host(), dxg.host(), kRtol, name + " dx");
    expect_close(dgc.host(), dgg.host(), kRtol, name + " dgamma");
    expect_close(dbc.host(), dbg.host(), kRtol, name + " dbeta");
    cpu_->batchnorm_forward_eval(n, c, hw, xc.get(), gc.get(), bc.get(), 1e-5f, rmc.get(), rvc.get(), yc.get());
    gpu_->batchnorm_forward_eval(n, c, hw, xg.get(), gg.get(), bg.get(), 1e-5f, rmg.get(), rvg.get(), yg.get());
    expect_close(yc.host(), yg.host(), kRtol, name + " eval y");
  }
}

TEST_F(CudaVsCpu, SoftmaxCrossEntropy) {
  for (auto [n, classes] : std::vector<std::array<int64_t, 2>>{{64, 10}, {7, 1000}, {33, 3}}) {
    const std::string name = "softmax xent n" + std::to_string(n) + " classes" + std::to_string(classes);
    auto logits = random_floats(n * classes, 150, -4.0f, 4.0f);
    std::vector<int32_t> labels(n);
    for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>((i * 7 + 3) % classes);
    // Sample 0: a tie for the maximum (the first index wins the argmax on both backends).
    logits[1] = logits[2] = 9.0f;
    Array zc(*cpu_, logits), lc(*cpu_, labels), pc(*cpu_, n * classes), dc(*cpu_, n * classes);
    Array zg(*gpu_, logits), lg(*gpu_, labels), pg(*gpu_, n * classes), dg(*gpu_, n * classes);
    double loss_c = 0, loss_g = 0;
    int64_t hits_c = -1, hits_g = -2;
    cpu_->softmax_xent_forward(zc.get(), lc.as_int(), n, classes, pc.get(), &loss_c, &hits_c);
    gpu_->softmax_xent_forward(zg.get(), lg.as_int(), n, classes, pg.get(), &loss_g, &hits_g);
    EXPECT_NEAR(loss_g, loss_c, 1e-5 * std::fabs(loss_c)) << name;
    EXPECT_EQ(hits_g, hits_c) << name;
    expect_close(pc.host(), pg.host(), kRtol, name + " probs");
    cpu_->softmax_xent_backward(pc.get(), lc.as_int(), n, classes, dc.get());
    gpu_->softmax_xent_backward(pg.get(), lg.as_int(), n, classes, dg.get());
    expect_close(dc.host(), dg.host(), kRtol, name + " dlogits");
  }
}

TEST_F(CudaVsCpu, SoftmaxCrossEntropyRejectsABadLabelNamingTheSample) {
  const int64_t n = 8, classes = 4;
  std::vector<int32_t> labels = {0, 1, 2, 3, 0, 9, 1, -1};
  Array z(*gpu_, random_floats(n * classes, 160)), l(*gpu_, labels), p(*gpu_, n * classes);
  double loss = 0;
  int64_t hits = 0;
  try {
    gpu_->softmax_xent_forward(z.get(), l.as_int(), n, classes, p.get(), &loss, &hits);
    FAIL() << "no error for label 9";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("label 9 of sample 5"), std::string::npos) << msg;
  }
}

TEST_F(CudaVsCpu, MeanSquaredError) {
  for (auto [n, dim] : std::vector<std::array<int64_t, 2>>{{100, 1}, {37, 13}, {5000, 3}}) {
    const std::string name = "mse n" + std::to_string(n) + " dim" + std::to_string(dim);
    const auto pred = random_floats(n * dim, 170), target = random_floats(n * dim, 171);
    Array pc(*cpu_, pred), tc(*cpu_, target), dc(*cpu_, n * dim), pg(*gpu_, pred), tg(*gpu_, target),
        dg(*gpu_, n * dim);
    double loss_c = 0, loss_g = 0;
    cpu_->mse_forward(pc.get(), tc.get(), n, dim, &loss_c);
    gpu_->mse_forward(pg.get(), tg.get(), n, dim, &loss_g);
    EXPECT_NEAR(loss_g, loss_c, 1e-9 * std::fabs(loss_c) + 1e-12) << name;
    cpu_->mse_backward(pc.get(), tc.get(), n, dim, dc.get());
    gpu_->mse_backward(pg.get(), tg.get(), n, dim, dg.get());
    expect_close(dc.host(), dg.host(), kRtol, name + " dpred");
  }
}

TEST_F(CudaVsCpu, ResidualShortcutPad) {
  for (auto [c_in, c_out, h, stride] :
       std::vector<std::array<int64_t, 4>>{{16, 32, 32, 2}, {8, 8, 7, 1}, {3, 8, 9, 2}}) {
    const int64_t n = 3, ho = (h + stride - 1) / stride, nx = n * c_in * h * h, ny = n * c_out * ho * ho;
    const std::string name = "shortcut " + std::to_string(c_in) + "->" + std::to_string(c_out);
    const auto x = random_floats(nx, 180), dy = random_floats(ny, 181), dx0 = random_floats(nx, 182);
    Array xc(*cpu_, x), yc(*cpu_, ny, 7.0f), dyc(*cpu_, dy), dxc(*cpu_, dx0);
    Array xg(*gpu_, x), yg(*gpu_, ny, 7.0f), dyg(*gpu_, dy), dxg(*gpu_, dx0);
    cpu_->shortcut_pad_forward(n, c_in, h, h, stride, c_out, xc.get(), yc.get());
    gpu_->shortcut_pad_forward(n, c_in, h, h, stride, c_out, xg.get(), yg.get());
    EXPECT_EQ(yc.host(), yg.host()) << name;
    cpu_->shortcut_pad_backward(n, c_in, h, h, stride, c_out, dyc.get(), dxc.get());
    gpu_->shortcut_pad_backward(n, c_in, h, h, stride, c_out, dyg.get(), dxg.get());
    expect_close(dxc.host(), dxg.host(), kRtol, name + " backward (accumulates)");
  }
}

}  // namespace
}  // namespace pshard::models
