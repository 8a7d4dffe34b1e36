// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small valid inputs.
//
//   build-fuzz/bin/pshard_fuzz_seeds tests/fuzz/corpus
//
// Each seed is laid out as its target reads it (see the comment at the top of each fuzz_*.cc).
#include <capnp/message.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/compression/codec.h"
#include "common/config/config.h"
#include "common/control/control_codec.h"
#include "common/keys/slice_layout.h"
#include "common/protocol/codec.h"
#include "worker/data/cifar10.h"
#include "worker/data/idx.h"
#include "worker/data/image_codec.h"
#include "worker/data/packed.h"

using namespace pshard;
using namespace pshard::protocol;

namespace {

std::string root;

void save(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = root + "/" + target;
  mkdir(dir.c_str(), 0755);
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) {
    std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// --- fuzz_kv_message: flags, then [u16 length][bytes] frames ------------------------------------
std::string frame(const std::string& bytes) {
  std::string out;
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.push_back(static_cast<char>(bytes.size() >> 8));
  return out + bytes;
}

void kv_seeds() {
  SliceLayout layout({{"w", 40}, {"b", 8}}, 64, 2);
  Message m;
  m.request_id = 7;
  m.job_token = "tok";
  m.sender_role = Role::WORKER;
  m.sender_rank = 0;
  m.step = 3;
  m.layout_fingerprint = layout.fingerprint();
  std::vector<std::string> payloads;
  for (const SliceInfo& s : layout.slices()) {
    if (s.server != 0) continue;
    m.keys.push_back({s.tensor, s.slice, s.offset, s.length, DType::FLOAT32});
    payloads.push_back(std::string(s.length * 4, '\x01'));
  }
  auto with_payloads = [&](uint8_t flags, const Message& msg, bool carry) {
    std::string out(1, static_cast<char>(flags));
    out += frame(encode_header(msg));
    if (carry) {
      for (const std::string& p : payloads) out += frame(p);
    }
    return out;
  };
  Message init = m;
  init.type = MessageType::INIT;
  init.slice_bytes = 64;
  init.num_servers = 2;
  init.run_total_steps = 100;
  init.tensors = {{"w", 40}, {"b", 8}};
  save("fuzz_kv_message", "init", with_payloads(0, init, true));
  // Regression: an init asking for 2^31 slices (SliceLayout allocated them; now an Error).
  Message huge = init;
  huge.tensors = {{"w", uint64_t(1) << 35}, {"b", 8}};
  save("fuzz_kv_message", "regress-init-with-2pow31-slices", with_payloads(0, huge, true));
  Message push = m;
  push.type = MessageType::PUSH;
  save("fuzz_kv_message", "push", with_payloads(2, push, true));
  save("fuzz_kv_message", "push-unaligned", with_payloads(3, push, true));
  Message host_sum = push;  // the sum of a host's workers (cluster.host_aggregation)
  host_sum.type = MessageType::PUSH_PULL;
  host_sum.contributors = {host_sum.sender_rank, host_sum.sender_rank + 1};
  save("fuzz_kv_message", "push-pull-host-sum", with_payloads(2, host_sum, true));
  Message pp = m;
  pp.type = MessageType::PUSH_PULL;
  pp.sender_rank = 1;
  save("fuzz_kv_message", "pushpull", with_payloads(2, pp, true));
  Message skipped = pp;  // loss scaling: this worker's gradients of the step are not finite, skip it for all
  skipped.skipped = true;
  save("fuzz_kv_message", "pushpull-skipped", with_payloads(2, skipped, true));
  Message pull = m;
  pull.type = MessageType::PULL;
  save("fuzz_kv_message", "pull", with_payloads(2, pull, false));
  pull.pull_encoding = Encoding::BF16;
  save("fuzz_kv_message", "pull-bf16", with_payloads(2, pull, false));
  // Compressed pushes: one seed per codec, each payload a real encoding of the slice's gradient.
  for (Encoding e : {Encoding::FP16, Encoding::BF16, Encoding::TOPK, Encoding::RANDOMK, Encoding::ONEBIT}) {
    Message c = m;
    c.type = e == Encoding::ONEBIT ? MessageType::PUSH_PULL : MessageType::PUSH;
    std::string out(1, static_cast<char>(2));
    std::vector<std::string> encoded;
    auto codec = compression::make_codec({e, 0.25, 1});
    for (protocol::KeyRef& k : c.keys) {
      k.encoding = e;
      std::vector<float> g(k.length);
      for (size_t i = 0; i < g.size(); ++i) g[i] = 0.5f - 0.1f * static_cast<float>(i);
      std::string bytes(codec->max_encoded_bytes(k.length), '\0');
      bytes.resize(codec->encode(g.data(), k.length, reinterpret_cast<uint8_t*>(&bytes[0])));
      encoded.push_back(bytes);
    }
    out += frame(encode_header(c));
    for (const std::string& p : encoded) out += frame(p);
    save("fuzz_kv_message", std::string("push-") + compression::encoding_name(e), out);
  }
  // Embedding tables: a declaration, and a worker's pull and push of its rows (server 0 of 2 holds the even rows).
  Message table_init;
  table_init.type = MessageType::TABLE_INIT;
  table_init.job_token = "tok";
  table_init.sender_role = Role::WORKER;
  table_init.table_seed = 9;
  table_init.tables.push_back({"t", 64, 4, protocol::TableInit::NORMAL, 0.5f});
  save("fuzz_kv_message", "table-init", with_payloads(0, table_init, false));
  const uint64_t ids[] = {6, 2, 40};
  const std::string id_frame(reinterpret_cast<const char*>(ids), sizeof ids);
  Message row_pull = table_init;
  row_pull.type = MessageType::ROW_PULL;
  row_pull.tables.clear();
  row_pull.table_seed = 0;
  save("fuzz_kv_message", "row-pull", std::string(1, '\x08') + frame(encode_header(row_pull)) + frame(id_frame));
  row_pull.row_encoding = Encoding::BF16;
  save("fuzz_kv_message", "row-pull-bf16", std::string(1, '\x08') + frame(encode_header(row_pull)) + frame(id_frame));
  Message row_push = row_pull;
  row_push.type = MessageType::ROW_PUSH;
  row_push.row_encoding = Encoding::NONE;
  const std::string grads(3 * 4 * sizeof(float), '\x01');
  save("fuzz_kv_message", "row-push",
       std::string(1, '\x08') + frame(encode_header(row_push)) + frame(id_frame) + frame(grads));
  Message row_push_shm = row_push;  // the gradients in the sender's row segment (the fuzzed server has none)
  row_push_shm.shared_memory = true;
  row_push_shm.row_offset = 256;
  save("fuzz_kv_message", "row-push-shm",
       std::string(1, '\x08') + frame(encode_header(row_push_shm)) + frame(id_frame));
  Message ping;
  ping.type = MessageType::PING;
  ping.job_token = "tok";
  save("fuzz_kv_message", "ping", with_payloads(0, ping, false));
  Message err;
  err.type = MessageType::ERROR;
  err.error_code = ErrorCode::WRONG_LENGTH;
  err.error_message = "key 0: wrong length";
  save("fuzz_kv_message", "error", with_payloads(0, err, false));
}

// --- fuzz_control_message: one frame ------------------------------------------------------------
std::string bytes_of(capnp::MessageBuilder& b) {
  zmq::message_t f = control_codec::encode(b);
  return std::string(static_cast<const char*>(f.data()), f.size());
}

void control_seeds() {
  NodeInfo node{NodeRole::kServer, 1, "tcp://127.0.0.1:4000", "host-a", 42, "boot-a/net:[4026531992]"};
  {
    capnp::MallocMessageBuilder b;
    auto r = b.initRoot<control::ControlMessage>().initRegister();
    r.setRole(wire::Role::WORKER);
    r.setRequestedRank(-1);
    r.setEndpoint("");
    r.setHost("host-b");
    r.setPid(43);
    r.setLocality("boot-b/net:[4026531992]");
    r.setJobToken("tok");
    r.setLayoutFingerprint(99);
    save("fuzz_control_message", "register", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto cm = b.initRoot<control::ControlMessage>().initClusterMap();
    cm.setNumServers(1);
    cm.setNumWorkers(1);
    control_codec::fill_node(node, cm.initServers(1)[0]);
    NodeInfo worker{NodeRole::kWorker, 0, "", "host-b", 43, "boot-b/net:[4026531992]"};
    control_codec::fill_node(worker, cm.initWorkers(1)[0]);
    cm.setYourRole(wire::Role::WORKER);
    cm.setHeartbeatIntervalMs(500);
    cm.setHeartbeatTimeoutMs(5000);
    save("fuzz_control_message", "cluster-map", bytes_of(b));
  }
  {
    // An elastic job's map: two of three ranks vacant, sent to a worker that joins the running job.
    capnp::MallocMessageBuilder b;
    auto cm = b.initRoot<control::ControlMessage>().initClusterMap();
    cm.setNumServers(1);
    cm.setNumWorkers(3);
    cm.setMinWorkers(1);
    cm.setJoinsRunning(true);
    control_codec::fill_node(node, cm.initServers(1)[0]);
    auto workers = cm.initWorkers(3);
    for (uint32_t r = 0; r < 3; ++r) {
      NodeInfo w{NodeRole::kWorker, r, "", r == 0 ? "host-b" : "", r == 0 ? 43 : 0, ""};
      control_codec::fill_node(w, workers[r]);
    }
    cm.setYourRole(wire::Role::WORKER);
    cm.setYourRank(0);
    cm.setHeartbeatIntervalMs(500);
    cm.setHeartbeatTimeoutMs(5000);
    save("fuzz_control_message", "cluster-map-elastic", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initBarrierEnter().setName("epoch-1");
    save("fuzz_control_message", "barrier", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto enter = b.initRoot<control::ControlMessage>().initBarrierEnter();
    enter.setName("finite gradients");
    enter.setVote(true);
    save("fuzz_control_message", "barrier-vote", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initHeartbeat().setSeq(5);
    save("fuzz_control_message", "heartbeat", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto a = b.initRoot<control::ControlMessage>().initAbort();
    a.setReason("server 1 is dead");
    a.setHasDeadNode(true);
    control_codec::fill_node(node, a.initDeadNode());
    save("fuzz_control_message", "abort", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto d = b.initRoot<control::ControlMessage>().initNodeDead();
    d.setReason("no heartbeat for 5000 ms");
    control_codec::fill_node(node, d.initNode());
    save("fuzz_control_message", "node-dead", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    control_codec::fill_node(node, b.initRoot<control::ControlMessage>().initWorkerRegistered());
    save("fuzz_control_message", "worker-registered", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto e = b.initRoot<control::ControlMessage>().initEpochEnter();
    e.setEpoch(3);
    e.setStep(936);
    save("fuzz_control_message", "epoch-enter", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto p = b.initRoot<control::ControlMessage>().initEpochPlan();
    p.setEpoch(3);
    p.setFirstStep(936);
    auto members = p.initMembers(3);
    for (unsigned i = 0; i < 3; ++i) members.set(i, i);
    p.setJoin(true);
    save("fuzz_control_message", "epoch-plan", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initEpochJoined().setEpoch(3);
    save("fuzz_control_message", "epoch-joined", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto c = b.initRoot<control::ControlMessage>().initBatchClaim();
    c.setEpoch(2);
    c.setBatches(1000);
    c.setCount(8);
    save("fuzz_control_message", "batch-claim", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto g = b.initRoot<control::ControlMessage>().initBatchesGranted();
    g.setEpoch(2);
    g.setFirst(992);
    g.setCount(8);
    save("fuzz_control_message", "batches-granted", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initLeave().setExitStatus(0);
    save("fuzz_control_message", "leave", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto m = b.initRoot<control::ControlMessage>().initProcessEnded();
    m.setJobToken("0123456789abcdef0123456789abcdef");
    m.setRole(wire::Role::WORKER);
    m.setRank(1);
    m.setPid(4242);
    m.setHow("was killed by signal 9 (SIGKILL)");
    save("fuzz_control_message", "process_ended", bytes_of(b));
    m.setAnyRank(true);  // pshard join's notice: by pid on the watcher's host
    m.setLocality("0123-boot-id/net:[4026531992]");
    save("fuzz_control_message", "process_ended_any_rank", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    auto m = b.initRoot<control::ControlMessage>().initJobFact();
    m.setKind(control::JobFact::Kind::MODEL_SAVED);
    m.setPath("/runs/fmnist/model.bin");
    save("fuzz_control_message", "job_fact", bytes_of(b));
  }
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<control::ControlMessage>().initReport().setJson(
        "{\"event\":\"worker_epoch\",\"rank\":0,\"epoch\":1,\"step\":10,\"steps\":10,\"host\":0,\"samples\":64,"
        "\"has_train_loss\":true,"
        "\"loss_sum\":3.5,\"has_train_acc\":true,\"correct\":20,\"evaluated\":false,\"test_n\":0,"
        "\"has_test_loss\":false,\"test_loss_sum\":0,\"has_test_acc\":false,\"test_correct\":0,"
        "\"epoch_s\":1.5,\"eval_s\":0,\"data_s\":0.1,\"forward_s\":0.3,\"backward_s\":0.6,\"comm_wait_s\":0.2,\"other_"
        "s\":0.3,\"bytes_sent\":100,\"bytes_recv\":100,"
        "\"fp32_bytes_sent\":200,\"fp32_bytes_recv\":200,\"shm_bytes_sent\":0,\"shm_bytes_recv\":0,\"wall_s\":2,"
        "\"lr\":0.1}");
    save("fuzz_control_message", "report", bytes_of(b));
    b.initRoot<control::ControlMessage>().initReport().setJson(
        "{\"event\":\"worker_epoch\",\"rank\":1,\"epoch\":1,\"step\":10,\"steps\":10,\"host\":0,\"samples\":64,"
        "\"has_train_loss\":false,\"loss_sum\":0,\"has_train_acc\":false,\"correct\":0,\"evaluated\":true,"
        "\"test_n\":300,\"has_test_loss\":false,\"test_loss_sum\":0,\"has_test_acc\":false,\"test_correct\":0,"
        "\"epoch_s\":1.5,\"eval_s\":0,\"data_s\":0.1,\"forward_s\":0.3,\"backward_s\":0.6,\"comm_wait_s\":0.2,"
        "\"other_s\":0.3,\"bytes_sent\":100,\"bytes_recv\":100,\"fp32_bytes_sent\":200,"
        "\"fp32_bytes_recv\":200,\"shm_bytes_sent\":0,\"shm_bytes_recv\":0,\"wall_s\":2,\"lr\":0.1,"
        "\"figures\":{\"test_auc\":0.79,\"test_logloss\":\"nan\"}}");
    save("fuzz_control_message", "report-figures", bytes_of(b));
  }
}

// --- fuzz_config: TOML, then "%%" and overrides ---------------------------------------------
void config_seeds() {
  save("fuzz_config", "defaults", Config::defaults().to_toml());
  save("fuzz_config", "small",
       "[model]\nname = \"lenet\"\nhidden = [256, 128]\n\n[optimizer]\nname = \"adam\"\nlr = 0.001\n"
       "\n[cluster]\nmode = \"ssp\"\nstaleness = 2\n%%\noptimizer.lr=0.05\ntrain.epochs=3\n");
}

// --- data files: flags byte, then the file ------------------------------------------------------
void data_seeds() {
  const std::string tmp = root + "/.tmp-seed";
  std::vector<uint8_t> pixels(2 * 3 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 13);
  data::write_idx(tmp, {2, 3, 3}, pixels);
  save("fuzz_idx", "images-plain", std::string(1, '\x00') + slurp(tmp));
  save("fuzz_idx", "images-gzip-on-write", std::string(1, '\x07') + slurp(tmp));
  data::write_idx(tmp, {4}, {1, 2, 3, 9});
  save("fuzz_idx", "labels-limited", std::string(1, '\x0a') + slurp(tmp));
  data::write_idx(tmp + ".gz", {2, 3, 3}, pixels);
  save("fuzz_idx", "images-gz-file", std::string(1, '\x00') + slurp(tmp + ".gz"));
  std::remove((tmp + ".gz").c_str());

  std::vector<uint8_t> labels = {3, 9};
  std::vector<uint8_t> cifar_pixels(2 * 3072);
  for (size_t i = 0; i < cifar_pixels.size(); ++i) cifar_pixels[i] = static_cast<uint8_t>(i);
  data::write_cifar10_file(tmp, labels, cifar_pixels);
  save("fuzz_cifar", "two-records", std::string(1, '\x00') + slurp(tmp));
  save("fuzz_cifar", "two-records-normalized-limited", std::string(1, '\x05') + slurp(tmp));

  data::Dataset d;
  d.name = "seed";
  d.sample_shape = {1, 2, 2};
  d.num_classes = 3;
  d.features = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  d.labels = {0, 2, 1};
  data::write_packed(tmp, d);
  save("fuzz_packed", "classes", std::string(1, '\x00') + slurp(tmp));
  save("fuzz_packed", "classes-fix-crc-limited", std::string(1, '\x07') + slurp(tmp));
  data::Dataset r;
  r.name = "regression";
  r.sample_shape = {3};
  r.target_dim = 1;
  r.features = {1, 2, 3, 4, 5, 6};
  r.targets = {0.5f, -0.5f};
  data::write_packed(tmp, r);
  save("fuzz_packed", "regression", std::string(1, '\x03') + slurp(tmp));
  std::remove(tmp.c_str());
}

// --- fuzz_image: flags byte, then a JPEG or PNG file ----------------------------------------
void image_seeds() {
  data::RgbImage image;
  image.width = 13;
  image.height = 9;
  for (int i = 0; i < 13 * 9 * 3; ++i) image.pixels.push_back(static_cast<uint8_t>(i * 29));
  std::vector<uint8_t> jpeg = data::encode_jpeg(image, 80);
  std::string j(jpeg.begin(), jpeg.end());
  save("fuzz_image", "jpeg-train-16", std::string(1, '\x03') + j);
  save("fuzz_image", "jpeg-eval-8", std::string(1, '\x00') + j);
  save("fuzz_image", "jpeg-truncated", std::string(1, '\x01') + j.substr(0, j.size() / 2));
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = 13;
  png.height = 9;
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t png_size = 0;
  png_image_write_get_memory_size(png, png_size, 0, image.pixels.data(), 0, nullptr);
  std::string p(png_size, '\0');
  if (png_image_write_to_memory(&png, &p[0], &png_size, 0, image.pixels.data(), 0, nullptr)) {
    p.resize(png_size);
    save("fuzz_image", "png-rgb-train-24", std::string(1, '\x05') + p);
  }
  png.format = PNG_FORMAT_GA;
  std::vector<uint8_t> ga(13 * 9 * 2, 200);
  png_image_write_get_memory_size(png, png_size, 0, ga.data(), 0, nullptr);
  std::string g(png_size, '\0');
  if (png_image_write_to_memory(&png, &g[0], &png_size, 0, ga.data(), 0, nullptr)) {
    g.resize(png_size);
    save("fuzz_image", "png-grey-alpha-eval-33", std::string(1, '\x06') + g);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (writes CORPUS_DIR/<target>/<seed>)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  mkdir(root.c_str(), 0755);
  kv_seeds();
  control_seeds();
  config_seeds();
  data_seeds();
  image_seeds();
  return 0;
}
