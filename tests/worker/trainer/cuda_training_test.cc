// Training on the GPU (label gpu: skipped without one): LeNet steps through Trainer on CUDA follow the CPU run, in
// process (LocalSync: pinned staging for the host optimizer) and through a parameter server (KvSync: gradients
// downloaded on the side stream, pulled weights uploaded before their layer's forward).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "optim/lr_policy.h"
#include "server/kv/kv_server.h"
#include "tests/models/gpu/gpu_compare.h"
#include "worker/client/kv_client.h"
#include "worker/trainer/kv_sync.h"
#include "worker/trainer/local_sync.h"
#include "worker/trainer/run_setup.h"
#include "worker/trainer/trainer.h"

namespace {

using namespace pshard;

// 16 steps of LeNet (batch 32) on synthetic 1x28x28 images, momentum SGD, one evaluation.
const char* kLenet = R"(
[run]
seed = 5
[data]
name = "synthetic-images"
image_shape = [1, 28, 28]
classes = 10
train_size = 512
test_size = 128
[model]
name = "lenet"
[train]
epochs = 1
batch_size = 32
log_every = 1
threads = 2
[optimizer]
name = "momentum"
lr = 0.05
momentum = 0.9
)";

struct Trained {
  std::vector<double> step_losses;
  std::vector<std::vector<float>> params;
  WorkerEpochReport epoch;
};

// Runs the trainer with `sync` (made from the setup's model) and reads the results back to the host.
template <typename MakeSync>
Trained train(const Config& cfg, MakeSync make_sync) {
  trainer::TrainingSetup setup = trainer::make_training_setup(cfg);
  trainer::TrainerOptions opts = trainer::TrainerOptions::from_config(cfg, 0, 1);
  const int64_t steps = trainer::steps_per_epoch_for(setup.data.train.size(), 1, opts.batch_size) * opts.epochs;
  Trained out;
  {
    auto sync = make_sync(cfg, opts.batch_size, steps);
    trainer::Trainer t(opts, *setup.model, setup.data, sync->get());
    t.run([&](const trainer::StepEvent& s) { out.step_losses.push_back(s.loss); },
          [&](const WorkerEpochReport& r) { out.epoch = r; });
  }
  for (const models::ParamRef& p : setup.model->params()) {
    std::vector<float> host(static_cast<size_t>(p.numel));
    setup.backend->download(host.data(), p.value, sizeof(float) * host.size());
    out.params.push_back(std::move(host));
  }
  return out;
}

// The sync object and whatever it needs to live (the server and client of KvSync), destroyed together.
struct LocalRun {
  trainer::LocalSync sync;
  LocalRun(const Config& cfg, int64_t batch, int64_t steps) : sync(cfg, batch, steps) {}
  trainer::ParameterSync& get() { return sync; }
};

struct ServerRun {
  std::unique_ptr<KvServer> server;
  std::unique_ptr<trainer::KvSync> sync;  // destroyed after the client: the client writes into its staging buffers
  std::unique_ptr<KvClient> client;
  ServerRun(const Config& cfg, int64_t steps, const std::vector<TensorSpec>& tensors) {
    KvServerOptions so = KvServerOptions::from_config(cfg);
    so.rank = 0;
    so.num_servers = 1;
    so.num_workers = 1;
    so.job_token = "gpu-test";
    server = std::make_unique<KvServer>(so);
    KvClientOptions co = KvClientOptions::from_config(cfg);
    co.rank = 0;
    co.servers = {server->endpoint()};
    co.tensors = tensors;
    co.job_token = "gpu-test";
    co.request_timeout = std::chrono::milliseconds(30000);
    co.run_total_steps = steps;
    client = std::make_unique<KvClient>(co);
    const optim::LrSchedule schedule = optim::LrPolicy::from_config(cfg).schedule(1, steps);
    sync =
        std::make_unique<trainer::KvSync>(*client, 0, cfg, [schedule](int64_t step) { return schedule.lr_at(step); });
  }
  ~ServerRun() {
    client.reset();
    sync.reset();
  }
  trainer::ParameterSync& get() { return *sync; }
};

void expect_follows_cpu(const Trained& cpu, const Trained& gpu, const std::string& what) {
  ASSERT_EQ(gpu.step_losses.size(), 16u) << what;
  ASSERT_EQ(cpu.step_losses.size(), gpu.step_losses.size()) << what;
  for (size_t s = 0; s < cpu.step_losses.size(); ++s) {
    EXPECT_NEAR(gpu.step_losses[s], cpu.step_losses[s], 1e-3 * std::fabs(cpu.step_losses[s]))
        << what << " step " << s + 1;
  }
  EXPECT_LT(gpu.step_losses.back(), gpu.step_losses.front()) << what << ": the loss did not go down";
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    models::gpu_test::expect_close(cpu.params[i], gpu.params[i], 1e-3, what + " parameter " + std::to_string(i));
  }
  EXPECT_EQ(gpu.epoch.test_n, 128) << what;
  EXPECT_NEAR(gpu.epoch.test_loss_sum, cpu.epoch.test_loss_sum, 1e-3 * std::fabs(cpu.epoch.test_loss_sum)) << what;
}

TEST(CudaTraining, LenetStepsThroughLocalSyncFollowTheCpuRun) {
  PSHARD_REQUIRE_GPU();
  const auto local = [](const Config& c, int64_t b, int64_t s) { return std::make_unique<LocalRun>(c, b, s); };
  const Trained cpu = train(Config::from_string(kLenet, "lenet.toml", {"train.device=cpu"}), local);
  const Trained gpu = train(Config::from_string(kLenet, "lenet.toml", {"train.device=cuda"}), local);
  expect_follows_cpu(cpu, gpu, "cuda, local");
}

TEST(CudaTraining, LenetStepsThroughAParameterServerFollowTheCpuRun) {
  PSHARD_REQUIRE_GPU();
  const auto local = [](const Config& c, int64_t b, int64_t s) { return std::make_unique<LocalRun>(c, b, s); };
  const Config cpu_cfg = Config::from_string(kLenet, "lenet.toml", {"train.device=cpu"});
  const Trained cpu = train(cpu_cfg, local);
  std::vector<TensorSpec> tensors;
  {
    trainer::TrainingSetup shape = trainer::make_training_setup(cpu_cfg);
    for (const models::ParamRef& p : shape.model->params()) tensors.push_back({p.name, static_cast<uint64_t>(p.numel)});
  }
  const auto served = [&](const Config& c, int64_t, int64_t s) { return std::make_unique<ServerRun>(c, s, tensors); };
  const Trained gpu = train(Config::from_string(kLenet, "lenet.toml", {"train.device=cuda"}), served);
  expect_follows_cpu(cpu, gpu, "cuda, through a server");
}

}  // namespace
