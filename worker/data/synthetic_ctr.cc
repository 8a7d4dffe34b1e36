// synthetic-ctr: Zipf ids by rejection-inversion, hidden factors hashed from (seed, field, id), Bernoulli labels.
#include "worker/data/synthetic_ctr.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "worker/data/random.h"

namespace pshard::data {

namespace {

// Stream ids keep the hidden model and the samples' draws independent of each other.
constexpr uint64_t kHiddenStream = 0x68696464656e, kSampleStream = 0x73616d706c65, kDenseStream = 0x64656e7365;
constexpr double kSqrt3 = 1.7320508075688772;

// log1p(x) / x and expm1(x) / x, by series near 0 where the quotient loses precision.
double log1p_over_x(double x) {
  return std::fabs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
double expm1_over_x(double x) {
  return std::fabs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

// 16 bits of a hash as a uniform value on [-sqrt 3, sqrt 3]: mean 0, variance 1 (to 2^-16).
double unit_uniform(uint64_t bits16) { return ((static_cast<double>(bits16) + 0.5) / 32768.0 - 1.0) * kSqrt3; }

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double exponent) : n_(n), exponent_(exponent) {
  if (n < 1 || n > (uint64_t{1} << 53)) {
    throw Error("zipf: the number of ids must be in [1, 2^53], got " + std::to_string(n));
  }
  if (!(exponent >= 0) || !std::isfinite(exponent)) {
    throw Error("zipf: the exponent must be a finite number >= 0, got " + std::to_string(exponent));
  }
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
  squeeze_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}

// h(x) = x^-exponent, the unnormalised density; H its integral (x^(1-e) - 1) / (1 - e), or log x at e = 1.
double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  double log_x = std::log(x);
  return expm1_over_x((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::h_integral_inverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // rounding: H's range ends at -1 / (1 - e) when e > 1
  return std::exp(log1p_over_x(t) * x);
}

uint64_t ZipfSampler::round_rank(double x) const {
  double k = std::floor(x + 0.5);
  if (!(k >= 1.0)) return 1;
  if (k >= static_cast<double>(n_)) return n_;
  return static_cast<uint64_t>(k);
}

// The draw x = H^-1(u) is kept as rank k when it falls in k's squeeze (cheap) or under h(k)'s
// share of H between k - 1/2 and k + 1/2 (exact).
bool ZipfSampler::accept(uint64_t k, double x, double u) const {
  double kd = static_cast<double>(k);
  return kd - x <= squeeze_ || u >= h_integral(kd + 0.5) - h(kd);
}

SyntheticCtr::SyntheticCtr(const SyntheticCtrOptions& options)
    : options_(options), zipf_(options.cardinality, options.zipf_exponent) {
  const auto& o = options_;
  auto fail = [](const std::string& what) { throw Error("synthetic-ctr: " + what); };
  if (o.samples < 0) fail("samples must be >= 0, got " + std::to_string(o.samples));
  if (o.num_fields < 1) fail("num_fields must be >= 1, got " + std::to_string(o.num_fields));
  if (o.num_dense < 0) fail("num_dense must be >= 0, got " + std::to_string(o.num_dense));
  if (o.factor_dim < 1) fail("factor_dim must be >= 1, got " + std::to_string(o.factor_dim));
  if (!std::isfinite(o.intercept)) fail("intercept must be finite");
  hidden_key_ = mix_seed(o.seed, kHiddenStream);
  sample_key_ = mix_seed(o.seed, kSampleStream);
  uint64_t dense_key = mix_seed(o.seed, kDenseStream);
  double dense_scale = o.num_dense > 0 ? 0.5 / std::sqrt(static_cast<double>(o.num_dense)) : 0.0;
  for (int64_t j = 0; j < o.num_dense; ++j) {
    uint64_t bits = mix_seed(dense_key, static_cast<uint64_t>(j)) >> 48;
    dense_weights_.push_back(dense_scale * unit_uniform(bits));
  }
}

double SyntheticCtr::logit(const uint64_t* ids, const float* dense) const {
  const int64_t fields = options_.num_fields, k_dim = options_.factor_dim;
  // sum_{f<g} <v_f, v_g> = (|sum_f v_f|^2 - sum_f |v_f|^2) / 2, per factor component.
  double bias_sum = 0, self_dots = 0;
  std::vector<double> sum(static_cast<size_t>(k_dim), 0.0);
  for (int64_t f = 0; f < fields; ++f) {
    uint64_t key = mix_seed(mix_seed(hidden_key_, static_cast<uint64_t>(f)), ids[f]);
    bias_sum += unit_uniform(mix_seed(key, 0) >> 48);
    uint64_t bits = 0;
    for (int64_t c = 0; c < k_dim; ++c) {
      if (c % 4 == 0) bits = mix_seed(key, 1 + static_cast<uint64_t>(c / 4));
      double v = unit_uniform(bits & 0xffff);
      bits >>= 16;
      sum[static_cast<size_t>(c)] += v;
      self_dots += v * v;
    }
  }
  double sum_sq = 0;
  for (double s : sum) sum_sq += s * s;
  double fd = static_cast<double>(fields), pairs = fd * (fd - 1) / 2;
  double interactions = pairs > 0 ? 0.5 * (sum_sq - self_dots) / std::sqrt(static_cast<double>(k_dim) * pairs) : 0.0;
  double dense_term = 0;
  for (size_t j = 0; j < dense_weights_.size(); ++j) dense_term += dense_weights_[j] * dense[j];
  return options_.intercept + bias_sum / std::sqrt(fd) + interactions + dense_term;
}

void SyntheticCtr::fill(int64_t first, int64_t count, float* dense, uint64_t* ids, float* labels,
                        float* click_prob) const {
  if (first < 0 || count < 0) {
    throw Error("synthetic-ctr: bad sample range [" + std::to_string(first) + ", +" + std::to_string(count) + ")");
  }
  const int64_t fields = options_.num_fields, dims = options_.num_dense;
  for (int64_t i = 0; i < count; ++i) {
    PortableRng rng(mix_seed(sample_key_, static_cast<uint64_t>(first + i)));
    uint64_t* id = ids + i * fields;
    float* x = dense + i * dims;
    for (int64_t f = 0; f < fields; ++f) id[f] = zipf_.sample(rng) - 1;
    for (int64_t j = 0; j < dims; ++j) x[j] = static_cast<float>(rng.normal());
    double p = 1.0 / (1.0 + std::exp(-logit(id, x)));
    labels[i] = rng.uniform() < p ? 1.0f : 0.0f;
    if (click_prob != nullptr) click_prob[i] = static_cast<float>(p);
  }
}

CtrDataset SyntheticCtr::make(int64_t first, int64_t count) const {
  if (count < 0) throw Error("synthetic-ctr: sample count must be >= 0, got " + std::to_string(count));
  CtrDataset d;
  d.name = "synthetic-ctr";
  d.num_dense = options_.num_dense;
  d.num_fields = options_.num_fields;
  const size_t n = static_cast<size_t>(count);
  d.dense.resize(n * static_cast<size_t>(d.num_dense));
  d.ids.resize(n * static_cast<size_t>(d.num_fields));
  d.labels.resize(n);
  d.click_prob.resize(n);
  d.cardinality.assign(static_cast<size_t>(d.num_fields), options_.cardinality);
  fill(first, count, d.dense.data(), d.ids.data(), d.labels.data(), d.click_prob.data());
  return d;
}

CtrDataset make_synthetic_ctr(const SyntheticCtrOptions& options) {
  return SyntheticCtr(options).make(0, options.samples);
}

DataSplits make_synthetic_ctr_splits(const Config& cfg, int64_t train, int64_t test) {
  SyntheticCtrOptions o;
  o.samples = train;
  o.seed = static_cast<uint64_t>(cfg.get_int("run.seed"));
  o.num_fields = cfg.get_int("data.fields");
  o.cardinality = static_cast<uint64_t>(cfg.get_int("data.cardinality"));
  if (o.cardinality == 0) {
    throw Error(cfg.origin() +
                ": data.cardinality = 0: synthetic-ctr draws each field's ids from [0, cardinality), "
                "give it 1 or more");
  }
  o.zipf_exponent = cfg.get_double("data.zipf_exponent");
  o.num_dense = cfg.get_int("data.dense_features");
  const SyntheticCtr gen(o);
  DataSplits s;
  s.train = ctr_as_dataset(gen.make(0, train));
  s.train.click_prob = {};  // only the evaluation reads the true probabilities
  s.test = ctr_as_dataset(gen.make(train, test));
  return s;
}

}  // namespace pshard::data
