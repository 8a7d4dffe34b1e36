// Every configuration key pshard understands. Adding a key here is the one
// way to make it configurable; docs/CONFIG.md is printed from this table
// (`pshard config --list`).
#include "common/config/schema.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "common/error.h"

namespace pshard {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using T = ConfigType;

// Not const: install_config_choices() sets, once at startup, the choices of keys whose list a library above common
// owns (model.name). Fixed after that.
std::vector<ConfigKey> kSchema = {
    // run
    {"run.name", T::kString, "run", 0, 0, "", "name of the run (directory under runs/)", OnResume::kMayChange},
    {"run.seed", T::kInt, "1", 0, 4294967295.0, "", "seed for weights, shuffles and dropout"},
    {"log.level", T::kString, "info", 0, 0, "debug|info|warn|error", "minimum log level", OnResume::kMayChange},

    // model
    // choices: the names of the model zoo (models/zoo/registry.h), installed by the pshard executable (app/main.cc)
    {"model.name", T::kString, "mlp", 0, 0, "", "model architecture"},
    {"model.hidden", T::kIntList, "[256, 128]", 1, 1 << 20, "", "mlp hidden layer sizes"},
    {"model.dropout", T::kDouble, "0.0", 0, 0.99, "", "dropout probability (mlp, lenet)"},
    {"model.shortcut", T::kString, "pad", 0, 0, "pad|projection",
     "resnet20 shortcut where the shape changes: pad (option A, zero-padded identity) or projection (1x1 conv + BN)"},
    {"model.profile", T::kString, "", 0, 0, "",
     "profile model: JSON file of a real architecture's layers, parameter shapes and forward/backward ms at a batch "
     "(profiles/*.json; path relative to the working directory); times scale with train.batch_size / its batch"},
    {"model.embedding_dim", T::kInt, "16", 1, 4096, "", "dlrm: values per embedding row"},
    {"model.bottom_hidden", T::kIntList, "[32]", 1, 1 << 20, "",
     "dlrm: hidden sizes of the bottom MLP over the dense features (it ends in model.embedding_dim)"},
    {"model.embedding_init_scale", T::kDouble, "0.05", 0, 1e6, "", "dlrm: embedding rows start uniform on [-s, s]"},

    // data
    {"data.name", T::kString, "fashion-mnist", 0, 0,
     "fashion-mnist|mnist|cifar10|synthetic-regression|synthetic-images|synthetic-ctr|criteo|packed|image-folder",
     "data set"},
    {"data.dir", T::kString, "/usr/share/datasets/fashion-mnist", 0, 0, "",
     "directory of the data files (IDX for (fashion-)mnist, data_batch_*.bin for cifar10, class sub-folders of "
     "JPEG/PNG "
     "images for image-folder: docs/DATA.md)",
     OnResume::kMayChange},
    {"data.train_path", T::kString, "", 0, 0, "",
     "packed record file (data.name = packed) or Criteo text file (criteo) for training"},
    {"data.test_path", T::kString, "", 0, 0, "",
     "packed record file (data.name = packed) or Criteo text file (criteo) for testing"},
    {"data.train_size", T::kInt, "0", 0, 1e9, "", "samples to use for training (0: all; synthetic: how many to make)"},
    {"data.test_size", T::kInt, "0", 0, 1e9, "", "samples to use for testing (0: all; synthetic: how many to make)"},
    {"data.features", T::kInt, "10", 1, 1 << 20, "", "synthetic-regression: input features"},
    {"data.noise", T::kDouble, "0.01", 0, kInf, "", "synthetic-regression: label noise std"},
    {"data.fields", T::kInt, "8", 1, 1024, "", "synthetic-ctr: categorical fields per sample (one table each)"},
    {"data.cardinality", T::kInt, "100000", 0, 1e15, "",
     "synthetic-ctr: ids per field (rows of each table, >= 1); criteo: hash buckets per field (rows: buckets + 1; 0: "
     "the categorical values themselves, for hashed tables: embedding.hashed_rows)"},
    {"data.zipf_exponent", T::kDouble, "1.05", 0, 10, "",
     "synthetic-ctr: the ids' power law (id k drawn in proportion to (k+1)^-s; 0: uniform)"},
    {"data.dense_features", T::kInt, "4", 1, 1 << 16, "", "synthetic-ctr: dense features per sample"},
    {"data.prefetch", T::kInt, "2", 0, 64, "", "batches prepared ahead by the prefetch thread", OnResume::kMayChange},
    {"data.normalize", T::kBool, "true", 0, 0, "",
     "images: scale pixels to [0,1], then normalise with the data set's per-channel mean/std (false: [0,1] only)"},
    {"data.shuffle", T::kBool, "true", 0, 0, "", "reshuffle the training samples every epoch (seeded by run.seed)"},
    {"data.image_shape", T::kIntList, "[3, 32, 32]", 1, 1 << 16, "", "synthetic-images: sample shape C, H, W"},
    {"data.classes", T::kInt, "10", 2, 1 << 20, "", "synthetic-images: number of classes"},
    {"data.image_size", T::kInt, "224", 8, 4096, "",
     "image-folder: side of the square samples (training: random resized crop; test: resize to image_size / 0.875, "
     "centre crop)"},
    {"data.test_fraction", T::kDouble, "0.1", 0, 0.9, "",
     "image-folder without DIR/train and DIR/test (or DIR/val): share of each class held out for testing, chosen "
     "with run.seed"},
    {"data.augment", T::kBool, "true", 0, 0, "",
     "image-folder: random resized crop and horizontal flip for training (false: the test transform)"},
    {"data.decode_threads", T::kInt, "2", 1, 256, "", "image-folder: threads decoding the images of each batch"},
    {"data.mean", T::kString, "", 0, 0, "",
     "image-folder: per-channel mean R,G,B of pixels in [0,1], e.g. \"0.485,0.456,0.406\" (empty: computed from up "
     "to 256 training images)"},
    {"data.std", T::kString, "", 0, 0, "", "image-folder: per-channel std R,G,B (empty: computed with data.mean)"},

    // training
    {"train.epochs", T::kInt, "10", 1, 100000, "",
     "epochs to train (a program's run under `-- CMD`: its declared length, optional: its own loop decides)"},
    {"train.batch_size", T::kInt, "64", 1, 1 << 20, "", "samples per step per worker"},
    {"train.worker_batch_sizes", T::kIntList, "[]", 1, 1 << 20, "",
     "uneven workers (of different speed): worker r's batch is entry r, one entry per worker, instead of "
     "train.batch_size; a sync step's mean weighs each worker's gradients by its batch, so that batches 32 and 96 "
     "train as one worker with 128 (empty: every worker's is train.batch_size)"},
    {"train.threads", T::kInt, "0", 0, 1024, "",
     "CPU compute threads (0: the cores, shared among the workers launched on one host)", OnResume::kMayChange},
    {"train.cpu_kernels", T::kString, "onednn", 0, 0, "onednn|reference",
     "CPU kernels of convolution, batch norm, pooling and GEMM: onednn (oneDNN primitives, as PyTorch) or reference "
     "(OpenBLAS GEMM, im2col convolution, plain loops: what the tests compare against)"},
    {"train.device", T::kString, "cpu", 0, 0, "cpu|cuda", "compute backend of a worker", OnResume::kMayChange},
    {"train.precision", T::kString, "fp32", 0, 0, "fp32|bf16|fp16",
     "what a worker's convolutions and GEMMs read: fp32, bf16 (oneDNN's AVX-512 kernels, fastest with AVX512_BF16 "
     "or AMX; a CPU with AVX2 alone refuses it; fp32 accumulation "
     "and outputs; batch norm, pooling, softmax and loss in fp32; on CUDA: tensor-core GEMMs and channels-last cuDNN "
     "convolutions); bf16 also makes cluster.compression and cluster.pull_precision default to bf16. fp16: the same "
     "with IEEE half operands (on CPU, where oneDNN has no fp16 kernels, float32 kernels read operands rounded to "
     "half: fp16's numerics, slower than fp32)"},
    {"train.loss_scaling", T::kString, "auto", 0, 0, "auto|dynamic|static|none",
     "multiply the loss by train.loss_scale before backward (so that small gradients survive fp16) and divide the "
     "gradients back before the push; a step whose gradients are not finite on any worker is skipped by every worker "
     "(nothing pushed, the weights stay as they were). dynamic: the scale halves at each skipped step and doubles "
     "after train.loss_scale_growth_interval clean steps; static: it stays; auto: dynamic for fp16, none otherwise"},
    {"train.loss_scale", T::kDouble, "65536", 1e-8, 1e30, "",
     "train.loss_scaling: the initial (dynamic) or fixed (static) scale; a power of two scales without rounding"},
    {"train.loss_scale_growth_interval", T::kInt, "2000", 1, 1e9, "",
     "train.loss_scaling = dynamic: clean steps in a row after which the scale doubles"},
    {"train.cuda_conv_wgrad", T::kString, "gemm", 0, 0, "gemm|cudnn",
     "CUDA convolution weight gradient: gemm (im2col + one cuBLAS SGEMM per chunk of samples) or cudnn (cuDNN's "
     "deterministic direct algorithms); both deterministic"},
    {"train.init_from", T::kString, "", 0, 0, "",
     "transfer learning: a model file to start from (a run's model.bin, or a PyTorch state_dict converted by "
     "scripts/torch_to_pshard.py); tensors are matched by name, a tensor whose shape differs (the classifier for "
     "other classes) keeps its fresh initialisation and is named in the log"},
    {"train.freeze", T::kString, "", 0, 0, "",
     "comma-separated parameter name prefixes kept fixed (e.g. \"conv1,bn1,layer1,layer2,layer3\"): never updated, "
     "never pushed or pulled, and not on the servers"},
    {"train.eval", T::kBool, "true", 0, 0, "", "evaluate on the test set after every epoch", OnResume::kMayChange},
    {"train.log_every", T::kInt, "50", 0, 1e12, "",
     "steps between `step` lines in metrics.jsonl, one per worker with its phase times (0: none)",
     OnResume::kMayChange},
    {"train.simulate_compute_ms", T::kDouble, "0", 0, 1e7, "",
     "replace forward/backward by sleeps of this many ms per step, 1/3 forward and 2/3 backward (communication "
     "studies; 0: real compute)",
     OnResume::kMayChange},
    {"train.straggler_rank", T::kInt, "-1", -1, 1 << 20, "",
     "emulate a straggler: this worker's steps take train.straggler_factor times as long (it sleeps the difference; "
     "-1: none)",
     OnResume::kMayChange},
    {"train.straggler_factor", T::kDouble, "3", 1, 1000, "",
     "how much slower train.straggler_rank computes (its forward's time, with a backward of twice that, scaled)",
     OnResume::kMayChange},

    // optimizer (applied on the servers; by `pshard train` locally)
    {"optimizer.name", T::kString, "sgd", 0, 0, "", "update rule"},
    {"optimizer.lr", T::kDouble, "0.01", 0, 1e6, "",
     "base learning rate (unset: adam and adamw 0.001, adadelta 1.0, the others 0.01, as torch.optim)"},
    {"optimizer.momentum", T::kDouble, "0.9", 0, 1, "", "momentum / nesterov / lars momentum"},
    {"optimizer.beta1", T::kDouble, "0.9", 0, 1, "", "adam/adamw/lamb first-moment decay", OnResume::kFixed, true},
    {"optimizer.beta2", T::kDouble, "0.999", 0, 1, "", "adam/adamw/lamb second-moment decay", OnResume::kFixed, true},
    {"optimizer.rho", T::kDouble, "0.9", 0, 1, "",
     "adadelta/rmsprop decay of squared averages (unset: rmsprop 0.99, adadelta 0.9)", OnResume::kFixed, true},
    {"optimizer.eps", T::kDouble, "1e-8", 0, kInf, "",
     "denominator epsilon (unset: adagrad 1e-10, adadelta 1e-6, the others 1e-8)"},
    {"optimizer.weight_decay", T::kDouble, "0.0", 0, kInf, "",
     "weight decay coefficient (unset: adamw 0.01, the others 0)"},
    {"optimizer.weight_decay_mode", T::kString, "l2", 0, 0, "l2|decoupled",
     "l2: added to the gradient; decoupled: w -= lr*wd*w (AdamW style)"},
    {"optimizer.trust_coefficient", T::kDouble, "0.001", 0, kInf, "", "lars trust coefficient (eta)"},
    {"optimizer.ftrl_beta", T::kDouble, "1.0", 0, kInf, "",
     "ftrl: beta of the per-coordinate learning rate lr / (beta + sqrt(sum of squared gradients))"},
    {"optimizer.ftrl_l1", T::kDouble, "0.0", 0, kInf, "",
     "ftrl: L1 strength (a weight whose accumulated z lies within plus or minus it is exactly 0)"},
    {"optimizer.ftrl_l2", T::kDouble, "0.0", 0, kInf, "", "ftrl: L2 strength"},

    // embedding tables (held by the servers, updated row by row: docs/SPARSE.md)
    {"embedding.optimizer", T::kString, "same", 0, 0, "",
     "update rule of the tables' rows (same: optimizer.name), with optimizer.*'s other hyper-parameters; lazy: a "
     "row's state changes only in the steps that touch it"},
    {"embedding.lr", T::kDouble, "0.01", 0, 1e6, "",
     "learning rate of the tables' rows, constant (unset: optimizer.lr where set, else the rule's default; "
     "lr_schedule.* applies to dense tensors only)"},
    {"embedding.storage", T::kString, "fp32", 0, 0, "fp32|bf16",
     "how the servers store the tables' rows: float32, or bfloat16 (half the bytes of the rows; each update is "
     "computed in float32 and rounded to nearest even; the rows' optimizer state stays float32)"},
    {"embedding.hashed_rows", T::kInt, "0", 0, 1e15, "",
     "dlrm: 0 = tables of row indices (a table per field, as many rows as the field has ids); > 0: hashed tables "
     "keyed by the ids themselves (any 64-bit value), each holding at most this many rows, made on first push"},
    {"embedding.admit_after", T::kInt, "0", 0, 1e9, "",
     "dlrm, hashed tables: a row is stored once pushes held it in this many steps (0, 1: the first)"},
    {"embedding.expire_after", T::kInt, "0", 0, 1e15, "",
     "dlrm, hashed tables: a row no push held for this many steps is dropped (0: never)"},
    {"embedding.eps", T::kDouble, "1e-8", 0, kInf, "",
     "the tables' rule's denominator epsilon (unset: optimizer.eps where set, else the rule's default: adagrad "
     "1e-10, adadelta 1e-6, the others 1e-8)"},

    // learning-rate schedule (computed from the step)
    {"lr_schedule.name", T::kString, "constant", 0, 0, "constant|step|cosine", "decay shape after warmup"},
    {"lr_schedule.warmup_steps", T::kInt, "0", 0, 1e12, "",
     "linear warmup: lr rises from peak/W at step 0 to the peak at step W-1 (W = this value)"},
    {"lr_schedule.step_size", T::kInt, "1000", 1, 1e12, "", "step: decay every this many steps"},
    {"lr_schedule.gamma", T::kDouble, "0.1", 0, 1, "", "step: multiply the lr by this at each decay"},
    {"lr_schedule.total_steps", T::kInt, "0", 0, 1e12, "", "cosine: steps to decay over (0: the whole run)"},
    {"lr_schedule.min_lr", T::kDouble, "0.0", 0, 1e6, "", "cosine: final learning rate (at most optimizer.lr)"},
    {"lr_schedule.scaling", T::kString, "none", 0, 0, "none|linear",
     "linear: lr x global batch / reference batch (linear scaling rule)"},
    {"lr_schedule.reference_batch", T::kInt, "64", 1, 1 << 30, "", "batch size the base lr was tuned for"},

    // cluster (parameter-server job)
    {"cluster.mode", T::kString, "sync", 0, 0, "sync|async|ssp", "consistency model: BSP, ASP or SSP"},
    {"cluster.staleness", T::kInt, "2", 0, 1000000, "", "ssp: how many clocks a worker may run ahead"},
    {"cluster.batch_assignment", T::kString, "static", 0, 0, "static|dynamic",
     "which worker trains which batches of an epoch: static, each its fixed shard (the same share for every worker); "
     "dynamic (async only), the workers claim the epoch's batches from the coordinator as they go, so a faster worker "
     "trains more of them and a slow one no longer holds the epoch's end"},
    {"cluster.backup_workers", T::kInt, "0", 0, 1 << 16, "",
     "sync: a step closes once all but this many live workers pushed and a grace passed; later pushes of the step "
     "are dropped and counted, and their worker catches up (straggler mitigation; docs/PROTOCOL.md)",
     OnResume::kMayChange},
    {"cluster.backup_grace", T::kDouble, "0.1", 0, 100, "",
     "backup workers: how long a step waits for its last pushes after the quorum, as a share of the recent step "
     "time",
     OnResume::kMayChange},
    {"cluster.backup_grace_min_ms", T::kDouble, "2", 0, 1e6, "",
     "backup workers: the shortest grace (ms), so that jitter between on-time workers drops nothing",
     OnResume::kMayChange},
    {"cluster.slice_bytes", T::kInt, "1048576", 4, 1ll << 32, "",
     "largest slice of a tensor (bytes); lars/lamb take their trust ratio per slice of a cut tensor"},
    {"cluster.max_rows_per_request", T::kInt, "1048576", 1, 1ll << 32, "",
     "most rows of an embedding table one pull or push may name per server"},
    {"cluster.failure_policy", T::kString, "abort", 0, 0, "abort|continue",
     "on a dead worker: abort the job, or continue with the others", OnResume::kMayChange},
    {"cluster.min_workers", T::kInt, "0", 0, 1 << 20, "",
     "elastic sync jobs (pshard launch --workers MIN:MAX): the fewest workers an epoch trains with; workers join at "
     "an epoch's start and a dead one is dropped; 0: a fixed number of workers"},
    {"cluster.elastic_batch", T::kString, "worker", 0, 0, "worker|global",
     "elastic jobs: worker: each worker's batch is train.batch_size and the global batch (and, with "
     "lr_schedule.scaling = linear, the lr) follows the members; global: the global batch stays cluster.min_workers "
     "x train.batch_size and each member's batch is that / members (rounded down)"},
    {"cluster.heartbeat_interval_ms", T::kInt, "500", 10, 3600000, "", "heartbeat period (ms)", OnResume::kMayChange},
    {"cluster.heartbeat_timeout_ms", T::kInt, "5000", 50, 3600000, "", "silence after which a node is dead (ms)",
     OnResume::kMayChange},
    {"cluster.request_timeout_ms", T::kInt, "60000", 10, 86400000, "",
     "timeout of a push/pull (ms); a worker that holds a sync step up (async: pushes nothing) for this less two "
     "tenths, at most 10 s less, is stuck and treated as dead",
     OnResume::kMayChange},
    {"cluster.stall_warn_ms", T::kInt, "5000", 0, 86400000, "",
     "a sync step waiting this long names the workers it waits for (ms, 0 = never)"},
    {"cluster.rendezvous_timeout_ms", T::kInt, "60000", 100, 86400000, "",
     "how long to wait for every node to register (ms)", OnResume::kMayChange},
    {"cluster.server_threads", T::kInt, "2", 0, 256, "",
     "update threads per server (0: every slice is updated on its socket thread, no hand-offs)", OnResume::kMayChange},
    {"cluster.server_io_threads", T::kInt, "0", 0, 64, "",
     "ZeroMQ I/O threads per server, each serving its share of the workers' connections (0: one per worker, at "
     "most the machine's cores and 8)",
     OnResume::kMayChange},

    // compression of the data plane (docs/PROTOCOL.md "Encodings"); servers keep and aggregate float32
    {"cluster.compression", T::kString, "none", 0, 0, "none|fp16|bf16|topk|randomk|onebit",
     "encoding of pushed gradients: float32, half, bfloat16, the largest / random compression_ratio of each slice, "
     "or signs plus one scale per slice"},
    {"cluster.compression_ratio", T::kDouble, "0.01", 1e-6, 1, "",
     "topk/randomk: fraction of each slice's values pushed (at least one)"},
    {"cluster.error_feedback", T::kBool, "true", 0, 0, "",
     "topk/randomk/onebit: each worker adds what a push did not send to its next push of the slice"},
    {"cluster.compression_min_bytes", T::kInt, "4096", 0, 1ll << 40, "",
     "tensors smaller than this (bytes) are pushed and pulled as float32"},
    {"cluster.pull_precision", T::kString, "fp32", 0, 0, "fp32|fp16|bf16",
     "encoding of pulled weights (servers keep float32 master weights)"},
    {"cluster.transport", T::kString, "auto", 0, 0, "auto|tcp|shm",
     "how payloads move between a worker and a server on the same host: shared memory (shm; ZeroMQ keeps the "
     "headers), TCP, or auto: shared memory where the server is on this host, else TCP (docs/PROTOCOL.md)",
     OnResume::kMayChange},
    {"cluster.streams_per_server", T::kInt, "1", 1, 16, "",
     "TCP connections from each worker to each server; a request's slices are spread over them by slice, so that a "
     "link with a large bandwidth-delay product carries several TCP windows at once (docs/PROTOCOL.md)",
     OnResume::kMayChange},
    {"cluster.host_aggregation", T::kString, "auto", 0, 0, "auto|off|always",
     "sync jobs: the workers of a host sum their gradients in shared memory and the lowest of them sends one push "
     "and one pull per slice for them all; auto: to servers on other hosts, always: to every server (one host's "
     "measurements), off: each worker pushes its own (docs/PROTOCOL.md)"},

    {"cluster.server_failure_policy", T::kString, "abort", 0, 0, "abort|restart",
     "on a dead server: abort the job, or (pshard launch) restart the job from the newest complete checkpoint",
     OnResume::kMayChange},
    {"cluster.max_restarts", T::kInt, "3", 0, 1000, "",
     "server_failure_policy = restart: how many times pshard launch restarts a job before giving up",
     OnResume::kMayChange},

    {"cluster.restart_workers", T::kBool, "false", 0, 0, "",
     "pshard launch restarts a worker that died (up to cluster.max_restarts times); it rejoins the running sync job "
     "(needs failure_policy = continue)",
     OnResume::kMayChange},

    // checkpoints (sync mode; docs/OPERATIONS.md)
    {"checkpoint.every_steps", T::kInt, "0", 0, 1e12, "",
     "servers write RUN_DIR/checkpoints/server-R.step-K.ckpt every this many steps (0: no checkpoints)",
     OnResume::kMayChange},
    {"checkpoint.every_seconds", T::kDouble, "0", 0, 1e9, "",
     "also checkpoint at the first step boundary after this many seconds since the last one (worker 0 decides; 0: "
     "off)",
     OnResume::kMayChange},
    {"checkpoint.keep", T::kInt, "3", 0, 1000000, "", "checkpoints each server keeps (0: all)", OnResume::kMayChange},
    {"checkpoint.on_sigterm", T::kString, "exit", 0, 0, "exit|checkpoint",
     "what SIGTERM (preemption, a time limit, scancel) does to a sync job: exit at once, or checkpoint at the next "
     "step boundary and end with exit status 75 (requeue or --resume continues there, bit for bit)",
     OnResume::kMayChange},

    // timeline (docs/METRICS.md, "Timeline")
    {"trace.steps", T::kString, "", 0, 0, "",
     "trace the steps FIRST-LAST (e.g. \"100-120\"): every process writes RUN_DIR/trace/*.json (Chrome trace events), "
     "`pshard report` merges them into trace.json; at most 1000 steps; empty: no trace"},

    // security (docs/OPERATIONS.md, "Security")
    {"security.curve", T::kBool, "false", 0, 0, "",
     "CurveZMQ on every socket of the job (encryption, and only peers with the job's key file can connect)",
     OnResume::kMayChange},
    {"security.key_dir", T::kString, "", 0, 0, "",
     "directory of the job's key file curve.keys (mode 0600); empty: RUN_DIR/keys. --key-dir overrides it",
     OnResume::kMayChange},
};

// key -> "a|b|c" from install_config_choices (what the key's choices point to).
std::map<std::string, std::string> installed_choices;

}  // namespace

const std::vector<ConfigKey>& config_schema() { return kSchema; }

bool in_range(const ConfigKey& k, double v) {
  return std::isfinite(v) && v >= k.min && (k.max_open ? v < k.max : v <= k.max);
}

std::string range_text(const ConfigKey& k) {
  std::ostringstream out;
  out.precision(17);
  out << "[" << k.min << ", " << k.max << (k.max_open || std::isinf(k.max) ? ")" : "]");
  return out.str();
}

const ConfigKey* find_config_key(const std::string& key) {
  for (const ConfigKey& k : kSchema) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

void install_config_choices(const std::string& key, const std::vector<std::string>& choices) {
  ConfigKey* k = nullptr;
  for (ConfigKey& candidate : kSchema) {
    if (key == candidate.key) k = &candidate;
  }
  const std::string what = "install_config_choices: key '" + key + "'";
  if (!k || k->type != ConfigType::kString) throw Error(what + " is not a string key of the schema");
  if (*k->choices != '\0' && installed_choices.count(key) == 0) throw Error(what + " has built-in choices");
  std::string joined;
  bool has_default = false;
  for (const std::string& c : choices) {
    if (c.empty() || c.find('|') != std::string::npos) throw Error(what + ": bad choice '" + c + "'");
    joined += (joined.empty() ? "" : "|") + c;
    has_default = has_default || c == k->default_value;
  }
  if (!has_default) {
    throw Error(what + ": the default '" + k->default_value + "' is not one of '" + joined + "'");
  }
  std::string& stored = installed_choices[key];
  stored = joined;
  k->choices = stored.c_str();
}

}  // namespace pshard
