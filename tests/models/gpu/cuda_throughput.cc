// Training throughput of a zoo model on one backend (forward + backward + SGD step on the device, synthetic data), in
// any train.precision: what PyTorch's own loop does, next to `pshard bench compute`'s update on the host
// (tests/bench/resnet20_gpu_vs_pytorch.py, tests/bench/gpu_precision_vs_pytorch.py).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/util/args.h"
#include "common/util/json.h"
#include "models/model.h"
#include "models/zoo/registry.h"

int main(int argc, char** argv) {
  using namespace pshard;
  try {
    ArgParser p("models_cuda_throughput", "samples/s of forward + backward + SGD of a zoo model");
    p.add_option("model", "NAME", models::join_model_names("|"), false, "resnet20");
    p.add_option("device", "cpu|cuda", "compute backend", false, "cuda");
    p.add_option("batch", "N", "samples per step", false, "128");
    p.add_option("iters", "N", "timed steps", false, "50");
    p.add_option("warmup", "N", "untimed steps first", false, "5");
    p.add_option("threads", "N", "CPU threads (cpu device)", false, "0");
    p.add_flag("tf32", "allow TF32 tensor cores (cuda)");
    p.add_option("cuda-wgrad", "gemm|cudnn", "convolution weight gradient (cuda; train.cuda_conv_wgrad)", false,
                 "gemm");
    p.add_option("precision", "fp32|bf16|fp16", "what convolutions and GEMMs read (train.precision)", false, "fp32");
    p.add_option("classes", "K", "classes of the last layer", false, "10");
    p.add_flag("json", "print one JSON object");
    if (!p.parse(std::vector<std::string>(argv + 1, argv + argc))) return 0;
    const std::string device = p.get("device");
    if (device != "cpu" && device != "cuda") throw Error("--device must be cpu or cuda, got " + device);
    const models::Precision precision = models::precision_from_name(p.get("precision"));
    auto backend =
        device == "cuda"
            ? models::make_cuda_backend(0, p.flag("tf32"), models::cuda_conv_wgrad_from_name(p.get("cuda-wgrad")),
                                        models::kCudaWgradWorkspaceBytes, precision)
            : models::make_cpu_backend(static_cast<int>(p.get_int("threads")), models::CpuKernels::kOneDnn, precision);
    models::ModelSpec spec;
    spec.name = p.get("model");
    spec.hidden = {256, 128};
    spec.input_shape = models::model_info(spec.name).example_input;
    spec.num_classes = p.get_int("classes");
    spec.target_dim = 0;
    auto model = models::Model::create(spec, *backend);
    model->init_params(1);
    const int64_t batch = p.get_int("batch"), iters = p.get_int("iters"), warmup = p.get_int("warmup");
    if (batch <= 0 || iters <= 0 || warmup < 0) throw Error("--batch and --iters must be > 0, --warmup >= 0");
    int64_t per_sample = 1;
    for (int64_t d : spec.input_shape) per_sample *= d;
    std::vector<float> x(static_cast<size_t>(batch * per_sample));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    std::vector<int32_t> labels(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % spec.num_classes);
    // fp16 scales its loss and unscales and checks the gradients each step, as a worker (and GradScaler) does.
    const bool scaled = precision == models::Precision::kFp16;
    constexpr float kScale = 65536.0f;
    if (scaled) model->set_loss_scale(kScale);
    std::vector<std::pair<float*, int64_t>> grads;
    for (const models::ParamRef& q : model->params()) grads.emplace_back(q.grad, q.numel);
    auto step = [&] {
      model->forward(x.data(), batch, labels.data(), nullptr, true);  // waits for the loss (as a worker does)
      model->backward();
      if (scaled && !backend->scale_and_check(grads, 1.0f / kScale)) return;  // a skipped step
      for (const models::ParamRef& q : model->params()) backend->axpy(q.numel, -0.01f, q.grad, q.value);
    };
    for (int64_t i = 0; i < warmup; ++i) step();
    backend->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < iters; ++i) step();
    backend->synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double samples_per_s = static_cast<double>(batch * iters) / seconds;
    if (p.flag("json")) {
      Json j = Json::object();
      j.set("model", spec.name).set("device", backend->describe()).set("batch", batch).set("iters", iters);
      j.set("precision", models::precision_name(precision));
      j.set("samples_per_s", samples_per_s).set("step_ms", 1000.0 * seconds / static_cast<double>(iters));
      std::cout << j.dump() << "\n";
    } else {
      std::printf("%s on %s: batch %lld, %.1f samples/s (%.3f ms/step)\n", spec.name.c_str(),
                  backend->describe().c_str(), static_cast<long long>(batch), samples_per_s,
                  1000.0 * seconds / static_cast<double>(iters));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "models_cuda_throughput: %s\n", e.what());
    return 1;
  }
}
