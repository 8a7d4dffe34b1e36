// Every optimizer against hand-computed values over three steps, weight decay in both modes, trust ratios, errors.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "optim/optimizer.h"

namespace {

using pshard::optim::make_optimizer;
using pshard::optim::Optimizer;
using pshard::optim::OptimizerParams;
using Vec = std::vector<float>;

OptimizerParams params(const std::string& name, float eps = 0.0f) {
  OptimizerParams p;
  p.name = name;
  p.eps = eps;
  return p;
}

// Applies one update per gradient (t = 1, 2, ...) with a constant lr; returns the weights after each step.
std::vector<Vec> run(const OptimizerParams& p, Vec w, const std::vector<Vec>& grads, float lr) {
  auto opt = make_optimizer(p);
  Vec state(w.size() * opt->state_floats(), 0.0f);
  std::vector<Vec> after;
  int64_t t = 0;
  for (const Vec& g : grads) {
    opt->apply(w.data(), g.data(), state.data(), w.size(), lr, ++t);
    after.push_back(w);
  }
  return after;
}

void expect_near(const Vec& got, const Vec& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

void expect_steps(const std::vector<Vec>& got, const std::vector<Vec>& want, float tol = 2e-6f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) expect_near(got[s], want[s], tol, "after step " + std::to_string(s + 1));
}

// The gradient sequence most tests use, on w0 = [1, -1].
const std::vector<Vec> kGrads = {{0.5f, -2.0f}, {1.0f, 1.0f}, {-1.0f, 0.5f}};

TEST(Optimizer, StateFloatsPerRule) {
  const std::pair<const char*, size_t> expected[] = {{"sgd", 0},      {"momentum", 1}, {"nesterov", 1}, {"adagrad", 1},
                                                     {"adadelta", 2}, {"rmsprop", 1},  {"adam", 2},     {"adamw", 2},
                                                     {"lars", 1},     {"lamb", 2},     {"ftrl", 2}};
  for (const auto& [name, floats] : expected) {
    auto opt = make_optimizer(params(name));
    EXPECT_STREQ(opt->name(), name);
    EXPECT_EQ(opt->state_floats(), floats) << name;
  }
}

TEST(Optimizer, Sgd) {
  // lr 0.1, w0 [1, -2]: w -= 0.1*g.
  // g [0.5,-1] -> [0.95, -1.9];  g [1,2] -> [0.85, -2.1];  g [-0.5,0] -> [0.9, -2.1]
  expect_steps(run(params("sgd"), {1.0f, -2.0f}, {{0.5f, -1.0f}, {1.0f, 2.0f}, {-0.5f, 0.0f}}, 0.1f),
               {{0.95f, -1.9f}, {0.85f, -2.1f}, {0.9f, -2.1f}});
}

TEST(Optimizer, Momentum) {
  // m 0.9, lr 0.1, w0 [1, -2], same gradients as Sgd. v = 0.9v + g; w -= 0.1v.
  // 1: v [0.5, -1]                              w [0.95, -1.9]
  // 2: v [0.45+1, -0.9+2] = [1.45, 1.1]         w [0.95-0.145, -1.9-0.11] = [0.805, -2.01]
  // 3: v [1.305-0.5, 0.99] = [0.805, 0.99]      w [0.805-0.0805, -2.01-0.099] = [0.7245, -2.109]
  expect_steps(run(params("momentum"), {1.0f, -2.0f}, {{0.5f, -1.0f}, {1.0f, 2.0f}, {-0.5f, 0.0f}}, 0.1f),
               {{0.95f, -1.9f}, {0.805f, -2.01f}, {0.7245f, -2.109f}});
}

TEST(Optimizer, Nesterov) {
  // PyTorch form: v = 0.9v + g; w -= 0.1*(g + 0.9v). Same v as Momentum.
  // 1: g+0.9v = [0.5+0.45, -1-0.9] = [0.95, -1.9]        w [0.905, -1.81]
  // 2: g+0.9v = [1+1.305, 2+0.99] = [2.305, 2.99]         w [0.905-0.2305, -1.81-0.299] = [0.6745, -2.109]
  // 3: g+0.9v = [-0.5+0.7245, 0+0.891] = [0.2245, 0.891]  w [0.6745-0.02245, -2.109-0.0891] = [0.65205, -2.1981]
  expect_steps(run(params("nesterov"), {1.0f, -2.0f}, {{0.5f, -1.0f}, {1.0f, 2.0f}, {-0.5f, 0.0f}}, 0.1f),
               {{0.905f, -1.81f}, {0.6745f, -2.109f}, {0.65205f, -2.1981f}});
}

TEST(Optimizer, Adagrad) {
  // lr 0.1, eps 0, w0 [1, 1]: s += g^2; w -= 0.1 * g / sqrt(s).
  // g [3,4]:   s [9,16]    step [1, 1]         w [0.9, 0.9]
  // g [4,3]:   s [25,25]   step [0.8, 0.6]     w [0.82, 0.84]
  // g [0,-12]: s [25,169]  step [0, -12/13]    w [0.82, 0.84 + 1.2/13 = 0.932307692]
  expect_steps(run(params("adagrad"), {1.0f, 1.0f}, {{3.0f, 4.0f}, {4.0f, 3.0f}, {0.0f, -12.0f}}, 0.1f),
               {{0.9f, 0.9f}, {0.82f, 0.84f}, {0.82f, 0.932307692f}});
}

TEST(Optimizer, AdagradEpsInDenominator) {
  // eps 1: w -= 0.1 * 3 / (sqrt(9) + 1) = 0.075 -> 0.925
  expect_steps(run(params("adagrad", 1.0f), {1.0f}, {{3.0f}}, 0.1f), {{0.925f}});
}

TEST(Optimizer, Ftrl) {
  // lr (alpha) 0.1, beta 1, l1 0.01, l2 0, w0 [0, 0]; sigma = (sqrt(n') - sqrt(n)) / 0.1, z += g - sigma w,
  // w = -(z - sign(z) 0.01) / ((1 + sqrt(n)) / 0.1).
  // g [0.5, -2]: n [0.25, 4]   z [0.5, -2]                          w [-0.49/15, 1.99/30] = [-0.0326667, 0.0663333]
  // g [1, 1]:    n [1.25, 5]   sigma [6.18034, 2.36068]
  //              z [1.5 + 0.2018925, -1 - 0.1565918] = [1.7018925, -1.1565918]
  //              w [-1.6918925/21.18034, 1.1465918/32.36068] = [-0.0798802, 0.0354314]
  // With l1 = 2, g [0.5, -1.5]: |z| = [0.5, 1.5] <= 2, so both weights are exactly 0.
  OptimizerParams p = params("ftrl");
  p.ftrl_l1 = 0.01f;
  expect_steps(run(p, {0.0f, 0.0f}, {{0.5f, -2.0f}, {1.0f, 1.0f}}, 0.1f),
               {{-0.0326667f, 0.0663333f}, {-0.0798802f, 0.0354314f}});
  p.ftrl_l1 = 2.0f;
  expect_steps(run(p, {0.0f, 0.0f}, {{0.5f, -1.5f}}, 0.1f), {{0.0f, 0.0f}});
}

TEST(Optimizer, Rmsprop) {
  // rho 0.5, lr 0.1, eps 0, w0 [1, 1]: a = 0.5a + 0.5g^2; w -= 0.1 g / sqrt(a).
  // g [2,-4]: a [2, 8]    step [2/sqrt2, -4/sqrt8] = [1.414213562, -1.414213562]  w [0.858578644, 1.141421356]
  // g [2, 4]: a [3, 12]   step [2/sqrt3, 4/sqrt12] = [1.154700538, 1.154700538]   w [0.743108590, 1.025951302]
  // g [0, 6]: a [1.5, 24] step [0, 6/sqrt24 = 1.224744871]                        w [0.743108590, 0.903476815]
  OptimizerParams p = params("rmsprop");
  p.rho = 0.5f;
  expect_steps(run(p, {1.0f, 1.0f}, {{2.0f, -4.0f}, {2.0f, 4.0f}, {0.0f, 6.0f}}, 0.1f),
               {{0.858578644f, 1.141421356f}, {0.743108590f, 1.025951302f}, {0.743108590f, 0.903476815f}});
}

TEST(Optimizer, Adadelta) {
  // rho 0.5, eps 0.01, lr 1, w0 [1, -1], grads [1,-2], [2,0.5], [-1,1]:
  // a = 0.5a + 0.5g^2; delta = sqrt(u + 0.01) / sqrt(a + 0.01) * g; u = 0.5u + 0.5 delta^2; w -= delta.
  // element 0: 1: a 0.5,  delta 0.1/sqrt(0.51) = 0.140028008, u 0.5*0.01/0.51 = 0.009803922, w 0.859971992
  //            2: a 2.25, delta sqrt(0.019803922)/sqrt(2.26)*2 = 0.187219627, u 0.022427555, w 0.672752365
  //            3: a 1.625, delta sqrt(0.032427555)/sqrt(1.635)*-1 = -0.140830988, u 0.021130461, w 0.813583352
  // element 1: 1: a 2,      delta 0.1/sqrt(2.01)*-2 = -0.141069123, u 0.009950249, w -0.858930877
  //            2: a 1.125,  delta sqrt(0.019950249)/sqrt(1.135)*0.5 = 0.066289727, u 0.007172288, w -0.925220604
  //            3: a 1.0625, delta sqrt(0.017172288)/sqrt(1.0725)*1 = 0.126536389, u 0.011591873, w -1.051756993
  OptimizerParams p = params("adadelta", 0.01f);
  p.rho = 0.5f;
  expect_steps(run(p, {1.0f, -1.0f}, {{1.0f, -2.0f}, {2.0f, 0.5f}, {-1.0f, 1.0f}}, 1.0f),
               {{0.859971992f, -0.858930877f}, {0.672752365f, -0.925220604f}, {0.813583352f, -1.051756993f}});
}

TEST(Optimizer, Adadelta_LrScalesDelta) {
  // Same first step with lr 0.5: half the delta of element 0 (0.140028008 / 2) -> 1 - 0.070014004.
  OptimizerParams p = params("adadelta", 0.01f);
  p.rho = 0.5f;
  expect_steps(run(p, {1.0f}, {{1.0f}}, 0.5f), {{0.929985996f}});
}

// Adam, b1 0.9, b2 0.999, eps 0, lr 0.1, w0 [1, -1], kGrads:
// 1: m [0.05, -0.2], v [0.00025, 0.004]; m_hat = g, v_hat = g^2, step = lr*sign(g)  -> w [0.9, -0.9]
// 2: m [0.145, -0.08], v [0.00124975, 0.004996]; bc1 0.19, bc2 0.001999
//    m_hat [0.763157895, -0.421052632], v_hat [0.625187594, 2.499249625]
//    step 0.1*m_hat/sqrt(v_hat) = [0.096518203, -0.026633704]             -> w [0.803481797, -0.873366296]
// 3: m [0.0305, -0.022], v [0.0022485, 0.005241004]; bc1 0.271, bc2 0.002997001
//    m_hat [0.112546126, -0.081180812], v_hat [0.750250083, 1.7487495]    -> w [0.790488256, -0.867227410]
TEST(Optimizer, Adam) {
  expect_steps(run(params("adam"), {1.0f, -1.0f}, kGrads, 0.1f),
               {{0.9f, -0.9f}, {0.803481797f, -0.873366296f}, {0.790488256f, -0.867227410f}});
}

TEST(Optimizer, AdamL2WeightDecay) {
  // wd 0.1 added to the gradient: g' = g + 0.1w.
  // 1: g' [0.6, -2.1] -> sign step                                        w [0.9, -0.9]
  // 2: g' [1.09, 0.91]; m [0.163, -0.098], v [0.00154774, 0.00523369]
  //    m_hat [0.857894737, -0.515789474], v_hat [0.774257129, 2.618154077] w [0.802502968, -0.868123189]
  // 3: g' [-0.919749703, 0.413187681]; m_hat [0.201937379, -0.172993476],
  //    v_hat [0.798175168, 1.801527717]                                    w [0.779899888, -0.855234485]
  OptimizerParams p = params("adam");
  p.weight_decay = 0.1f;
  expect_steps(run(p, {1.0f, -1.0f}, kGrads, 0.1f),
               {{0.9f, -0.9f}, {0.802502968f, -0.868123189f}, {0.779899888f, -0.855234485f}});
}

TEST(Optimizer, AdamDecoupledWeightDecayIsAdamW) {
  // wd 0.1 decoupled: w = w*(1 - 0.1*0.1) - (Adam step above, unchanged by wd).
  // 1: [0.99 - 0.1, -0.99 + 0.1]                    = [0.89, -0.89]
  // 2: [0.8811 - 0.096518203, -0.8811 + 0.026633704] = [0.784581797, -0.854466296]
  // 3: Adam step 3 = 0.1*m_hat/sqrt(v_hat) = [0.012993541, -0.006138886]
  //    [0.776735979 - 0.012993541, -0.845921633 + 0.006138886] = [0.763742438, -0.839782747]
  const std::vector<Vec> want = {{0.89f, -0.89f}, {0.784581797f, -0.854466296f}, {0.763742438f, -0.839782747f}};
  OptimizerParams adam = params("adam");
  adam.weight_decay = 0.1f;
  adam.decoupled_weight_decay = true;
  expect_steps(run(adam, {1.0f, -1.0f}, kGrads, 0.1f), want);
  // adamw is decoupled even when the mode says l2.
  OptimizerParams adamw = params("adamw");
  adamw.weight_decay = 0.1f;
  adamw.decoupled_weight_decay = false;
  expect_steps(run(adamw, {1.0f, -1.0f}, kGrads, 0.1f), want);
}

TEST(Optimizer, AdamUsesTheGivenStepForBiasCorrection) {
  // Fresh state, g 2, lr 0.1, but t = 1000: m 0.2, v 0.004, bc1 = 1 - 0.9^1000 = 1, bc2 = 1 - 0.999^1000 = 0.632304575.
  // step = 0.1 * 0.2 / (sqrt(0.004) / sqrt(0.632304575)) = 0.02 / (0.063245553 / 0.795175814) = 0.251456671
  // (at t = 1 it would be 0.1).
  auto opt = make_optimizer(params("adam"));
  Vec w = {1.0f}, g = {2.0f}, state(2, 0.0f);
  opt->apply(w.data(), g.data(), state.data(), 1, 0.1f, 1000);
  EXPECT_NEAR(w[0], 1.0f - 0.251456671f, 2e-6f);
}

TEST(Optimizer, SgdWeightDecayModesAgreeMomentumModesDiffer) {
  // Plain SGD: L2 and decoupled are the same update. lr 0.1, wd 0.5, w 2, g 1:
  //   L2: 2 - 0.1*(1 + 1) = 1.8;  decoupled: 2*(1 - 0.05) - 0.1 = 1.8
  for (bool decoupled : {false, true}) {
    OptimizerParams p = params("sgd");
    p.weight_decay = 0.5f;
    p.decoupled_weight_decay = decoupled;
    expect_steps(run(p, {2.0f}, {{1.0f}}, 0.1f), {{1.8f}});
  }
  // Momentum 0.9, lr 0.1, wd 0.5, w0 2, g = 1 three times.
  //   L2:        g' 2     v 2      w 1.8   | g' 1.9   v 3.7   w 1.43  | g' 1.715 v 5.045 w 0.9255
  //   decoupled: v 1 w 1.9-0.1 = 1.8       | v 1.9  w 1.71-0.19 = 1.52 | v 2.71  w 1.444-0.271 = 1.173
  OptimizerParams p = params("momentum");
  p.weight_decay = 0.5f;
  expect_steps(run(p, {2.0f}, {{1.0f}, {1.0f}, {1.0f}}, 0.1f), {{1.8f}, {1.43f}, {0.9255f}});
  p.decoupled_weight_decay = true;
  expect_steps(run(p, {2.0f}, {{1.0f}, {1.0f}, {1.0f}}, 0.1f), {{1.8f}, {1.52f}, {1.173f}});
}

TEST(Optimizer, Lars) {
  // eta 0.02, m 0.9, lr 0.1, w0 [3, 4] (||w|| 5).
  // 1: g [0.6, 0.8], ||g|| 1: ratio 0.02*5/1 = 0.1; v [0.06, 0.08];          w [2.994, 3.992]
  // 2: g [0, 2], ||g|| 2, ||w|| = 0.998*5 = 4.99: ratio 0.0499;
  //    v [0.054, 0.072 + 0.0998] = [0.054, 0.1718];                          w [2.9886, 3.97482]
  // 3: g [0, 0]: ratio 1 (||g|| 0), v 0.9v = [0.0486, 0.15462];              w [2.98374, 3.959358]
  OptimizerParams p = params("lars");
  p.trust_coefficient = 0.02f;
  expect_steps(run(p, {3.0f, 4.0f}, {{0.6f, 0.8f}, {0.0f, 2.0f}, {0.0f, 0.0f}}, 0.1f),
               {{2.994f, 3.992f}, {2.9886f, 3.97482f}, {2.98374f, 3.959358f}});
}

TEST(Optimizer, LarsWeightDecayBothModes) {
  // eta 0.02, wd 0.2, lr 0.1, w [3, 4], g [0.6, 0.8].
  // L2: ratio 0.02*5/(1 + 0.2*5) = 0.05, d = g + 0.2w = [1.2, 1.6], v = [0.06, 0.08] -> w [2.994, 3.992]
  // decoupled: ratio 0.02*5/1 = 0.1, v = [0.06, 0.08], w = 0.98*[3, 4] - [0.006, 0.008] = [2.934, 3.912]
  OptimizerParams p = params("lars");
  p.trust_coefficient = 0.02f;
  p.weight_decay = 0.2f;
  expect_steps(run(p, {3.0f, 4.0f}, {{0.6f, 0.8f}}, 0.1f), {{2.994f, 3.992f}});
  p.decoupled_weight_decay = true;
  expect_steps(run(p, {3.0f, 4.0f}, {{0.6f, 0.8f}}, 0.1f), {{2.934f, 3.912f}});
}

TEST(Optimizer, LarsRatioIsOneForZeroWeights) {
  // ||w|| = 0: plain momentum step, w = 0 - 0.1*[1, -2].
  OptimizerParams p = params("lars");
  expect_steps(run(p, {0.0f, 0.0f}, {{1.0f, -2.0f}}, 0.1f), {{-0.1f, 0.2f}});
}

TEST(Optimizer, LarsNormsOverAllElementsOfTheCall) {
  // 1003 elements (8-lane loop plus a tail): w = 2, g = 1 everywhere -> ||w||/||g|| = 2, ratio 0.01*2 = 0.02,
  // w = 2 - 1.0 * 0.02 = 1.98 everywhere.
  OptimizerParams p = params("lars");
  p.trust_coefficient = 0.01f;
  auto out = run(p, Vec(1003, 2.0f), {Vec(1003, 1.0f)}, 1.0f);
  expect_near(out[0], Vec(1003, 1.98f), 1e-6f, "lars n=1003");
}

TEST(Optimizer, Lamb) {
  // b1 0.9, b2 0.999, eps 0, lr 0.1, w0 [3, 4], kGrads. u = Adam direction m_hat/sqrt(v_hat) (values as Adam above).
  // 1: u [1, -1], ||u|| sqrt2, ratio 5/sqrt2 = 3.535533906;       w [3 - 0.353553391, 4 + 0.353553391]
  // 2: u [0.965182026, -0.266337040], ||u|| 1.001255093, ||w|| 5.094811751, ratio 5.088425303
  //                                                              w [2.155320945, 4.489077004]
  // 3: u [0.129935410, -0.061388863], ||u|| 0.143707353, ||w|| 4.979680785, ratio 34.65153785
  //                                                              w [1.705074766, 4.701798854]
  expect_steps(run(params("lamb"), {3.0f, 4.0f}, kGrads, 0.1f),
               {{2.646446609f, 4.353553391f}, {2.155320945f, 4.489077004f}, {1.705074766f, 4.701798854f}}, 1e-5f);
}

TEST(Optimizer, LambWeightDecayBothModes) {
  // wd 0.1, otherwise as Lamb.
  // decoupled (paper form, decay inside the trust-scaled update): 1: u = [1 + 0.3, -1 + 0.4] = [1.3, -0.6],
  //   ||u|| sqrt(2.05) = 1.431782106, ratio 3.492151479, w = [3 - 0.453979692, 4 + 0.209529089]
  //   2: u [1.219784057, 0.154615869], ratio 4.001148082 -> w [2.057966644, 4.14766499]
  //   3: u [0.335732075, 0.353377636], ratio 9.499045961 -> w [1.739053203, 3.811989949]
  // L2 (g' = g + 0.1w before the moments): 1: g' [0.8, -1.6] -> u [1, -1], same as no decay
  //   2: u [0.987049546, -0.001608402], ratio 5.161650707 -> w [2.136966111, 4.354383592]
  //   3: u [0.378040957, 0.253940959], ratio 10.6507568   -> w [1.734323881, 4.083917252]
  OptimizerParams p = params("lamb");
  p.weight_decay = 0.1f;
  p.decoupled_weight_decay = true;
  expect_steps(run(p, {3.0f, 4.0f}, kGrads, 0.1f),
               {{2.546020308f, 4.209529089f}, {2.057966644f, 4.14766499f}, {1.739053203f, 3.811989949f}}, 1e-5f);
  p.decoupled_weight_decay = false;
  expect_steps(run(p, {3.0f, 4.0f}, kGrads, 0.1f),
               {{2.646446609f, 4.353553391f}, {2.136966111f, 4.354383592f}, {1.734323881f, 4.083917252f}}, 1e-5f);
}

TEST(Optimizer, LambNormsOverAllElementsOfTheCall) {
  // 1003 elements, w = 3, g = +1/-1 alternating: u = sign(g), ||w||/||u|| = 3 -> w = 3 -/+ 0.1*3 = 2.7 / 3.3.
  Vec g(1003), want(1003);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = i % 2 ? -1.0f : 1.0f;
    want[i] = i % 2 ? 3.3f : 2.7f;
  }
  auto out = run(params("lamb"), Vec(1003, 3.0f), {g}, 0.1f);
  expect_near(out[0], want, 2e-6f, "lamb n=1003");
}

TEST(Optimizer, LambRatioIsOneForZeroWeights) {
  // ||w|| = 0: w = 0 - 0.1 * sign(g).
  expect_steps(run(params("lamb"), {0.0f, 0.0f}, {{0.5f, -2.0f}}, 0.1f), {{-0.1f, 0.1f}});
}

TEST(Optimizer, StateIsPerSliceWithPlanesOfN) {
  // Updating [a | b] in one call equals updating a and b separately with their own state (elementwise rules),
  // over several steps: the state planes are indexed with the n of the call.
  for (const char* name : {"momentum", "nesterov", "adagrad", "adadelta", "rmsprop", "adam", "adamw", "ftrl"}) {
    auto opt = make_optimizer(params(name, 1e-8f));
    const size_t k = opt->state_floats();
    Vec whole = {1.0f, -2.0f, 0.5f, 3.0f, -1.0f}, a = {1.0f, -2.0f}, b = {0.5f, 3.0f, -1.0f};
    Vec s_whole(5 * k, 0.0f), s_a(2 * k, 0.0f), s_b(3 * k, 0.0f);
    for (int64_t t = 1; t <= 4; ++t) {
      Vec g = {0.3f * t, -1.0f, 2.0f / t, 0.7f, -0.2f * t};
      opt->apply(whole.data(), g.data(), s_whole.data(), 5, 0.05f, t);
      opt->apply(a.data(), g.data(), s_a.data(), 2, 0.05f, t);
      opt->apply(b.data(), g.data() + 2, s_b.data(), 3, 0.05f, t);
    }
    for (size_t i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(whole[i], i < 2 ? a[i] : b[i - 2]) << name << " element " << i;
  }
}

TEST(Optimizer, ConcurrentSlicesMatchSequential) {
  // One optimizer object, four threads on four slices at once == the same slices one after another.
  for (const char* name : {"adam", "lamb", "lars"}) {
    auto opt = make_optimizer(params(name, 1e-8f));
    const size_t n = 4096, k = opt->state_floats();
    std::vector<Vec> w_par(4), w_seq(4), s_par(4), s_seq(4), grads(4);
    for (size_t s = 0; s < 4; ++s) {
      for (size_t i = 0; i < n; ++i) {
        w_par[s].push_back(0.001f * static_cast<float>((i * 7 + s) % 113) - 0.05f);
        grads[s].push_back(0.01f * static_cast<float>((i * 13 + s * 5) % 31) - 0.15f);
      }
      w_seq[s] = w_par[s];
      s_par[s].assign(n * k, 0.0f);
      s_seq[s].assign(n * k, 0.0f);
    }
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<std::thread> threads;
      for (size_t s = 0; s < 4; ++s) {
        threads.emplace_back([&, s] { opt->apply(w_par[s].data(), grads[s].data(), s_par[s].data(), n, 0.01f, t); });
      }
      for (auto& th : threads) th.join();
      for (size_t s = 0; s < 4; ++s) opt->apply(w_seq[s].data(), grads[s].data(), s_seq[s].data(), n, 0.01f, t);
    }
    for (size_t s = 0; s < 4; ++s) EXPECT_EQ(w_par[s], w_seq[s]) << name << " slice " << s;
  }
}

TEST(Optimizer, UnknownNameIsAnErrorNamingIt) {
  try {
    make_optimizer(params("adamax"));
    FAIL() << "no error for an unknown optimizer";
  } catch (const pshard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'adamax'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("lamb"), std::string::npos) << e.what();
  }
}

TEST(Optimizer, BadHyperParametersAreErrorsNamingTheKey) {
  OptimizerParams p = params("adam");
  p.beta2 = 1.0f;  // bias correction 1 - 1^t = 0
  try {
    make_optimizer(p);
    FAIL() << "no error for beta2 = 1";
  } catch (const pshard::Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.beta2"), std::string::npos) << e.what();
  }
  p = params("sgd");
  p.lr = -0.1f;
  EXPECT_THROW(make_optimizer(p), pshard::Error);
}

TEST(Optimizer, StepCountBelowOneIsAnError) {
  auto opt = make_optimizer(params("adam"));
  Vec w = {1.0f}, g = {1.0f}, state(2, 0.0f);
  EXPECT_THROW(opt->apply(w.data(), g.data(), state.data(), 1, 0.1f, 0), pshard::Error);
  EXPECT_EQ(w[0], 1.0f);
}

TEST(Optimizer, ParamsFromConfig) {
  pshard::Config cfg = pshard::Config::from_string(
      "[optimizer]\nname = \"lamb\"\nlr = 0.5\nmomentum = 0.8\nbeta1 = 0.85\nbeta2 = 0.99\nrho = 0.7\neps = 1e-6\n"
      "weight_decay = 0.01\nweight_decay_mode = \"decoupled\"\ntrust_coefficient = 0.02\n",
      "opt.toml");
  OptimizerParams p = OptimizerParams::from_config(cfg);
  EXPECT_EQ(p.name, "lamb");
  EXPECT_FLOAT_EQ(p.lr, 0.5f);
  EXPECT_FLOAT_EQ(p.momentum, 0.8f);
  EXPECT_FLOAT_EQ(p.beta1, 0.85f);
  EXPECT_FLOAT_EQ(p.beta2, 0.99f);
  EXPECT_FLOAT_EQ(p.rho, 0.7f);
  EXPECT_FLOAT_EQ(p.eps, 1e-6f);
  EXPECT_FLOAT_EQ(p.weight_decay, 0.01f);
  EXPECT_FLOAT_EQ(p.trust_coefficient, 0.02f);
  EXPECT_TRUE(p.decoupled_weight_decay);
  EXPECT_STREQ(make_optimizer(p)->name(), "lamb");

  OptimizerParams d = OptimizerParams::from_config(pshard::Config::defaults());
  EXPECT_EQ(d.name, "sgd");
  EXPECT_FLOAT_EQ(d.lr, 0.01f);
  EXPECT_FALSE(d.decoupled_weight_decay);
}

}  // namespace

// The config and the optimizer library accept exactly the same hyper-parameter values (one table:
// the config schema), so that docs/CONFIG.md never advertises a value that is then refused.
TEST(OptimizerRanges, ConfigAndOptimizerAcceptTheSameValues) {
  struct Probe {
    const char* key;
    const char* value;
    bool accepted;
  };
  const Probe probes[] = {
      {"beta1", "0.99", true},
      {"beta1", "1.0", false},
      {"beta2", "1.0", false},
      {"rho", "1.0", false},
      {"momentum", "1.0", true},
      {"eps", "2.0", true},
      {"eps", "-1e-9", false},
      {"lr", "0.0", true},
      {"lr", "-0.1", false},
      {"weight_decay", "5.0", true},
      {"trust_coefficient", "-1.0", false},
  };
  for (const Probe& p : probes) {
    const std::string override = std::string("optimizer.") + p.key + "=" + p.value;
    bool config_ok = true;
    pshard::Config cfg = pshard::Config::defaults();
    try {
      cfg = pshard::Config::from_string("[optimizer]\nname = \"adam\"\n", "probe", {override});
    } catch (const pshard::Error&) {
      config_ok = false;
    }
    EXPECT_EQ(config_ok, p.accepted) << override;
    pshard::optim::OptimizerParams params;
    params.name = "adam";
    const float v = std::stof(p.value);
    if (std::string(p.key) == "beta1") params.beta1 = v;
    if (std::string(p.key) == "beta2") params.beta2 = v;
    if (std::string(p.key) == "rho") params.rho = v;
    if (std::string(p.key) == "momentum") params.momentum = v;
    if (std::string(p.key) == "eps") params.eps = v;
    if (std::string(p.key) == "lr") params.lr = v;
    if (std::string(p.key) == "weight_decay") params.weight_decay = v;
    if (std::string(p.key) == "trust_coefficient") params.trust_coefficient = v;
    bool optimizer_ok = true;
    try {
      pshard::optim::make_optimizer(params);
    } catch (const pshard::Error& e) {
      optimizer_ok = false;
      EXPECT_NE(std::string(e.what()).find(std::string("optimizer.") + p.key + " must be in ["), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(optimizer_ok, p.accepted) << override;
  }
}
