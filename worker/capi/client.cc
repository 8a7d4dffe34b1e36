// The C API's client and its shared helpers (client.h).
#include "worker/capi/client.h"

#include <algorithm>
#include <sstream>

#include "common/util/binary_file.h"
#include "common/util/log.h"

namespace pshard::capi {
namespace {

thread_local std::string last_error_text;
constexpr const char* kTensorListFile = "tensors.txt";

}  // namespace

int fail(int status, const std::string& message) {
  last_error_text = message;
  return status;
}

const std::string& last_error() { return last_error_text; }

void raise_to(std::atomic<int64_t>& v, int64_t x) {
  int64_t now = v.load();
  while (now < x && !v.compare_exchange_weak(now, x)) {
  }
}

// The job plan's variables (common/run/node_env.h); a malformed count is an ENVIRONMENT error.
pshard::NodeEnv read_node_env() {
  try {
    return pshard::NodeEnv::from_environment();
  } catch (const Error& e) {
    throw Failure{PSHARD_ERR_ENVIRONMENT, e.what()};
  }
}

// `value` of the variable `name`, which this program cannot run without.
const std::string& require_env(const std::string& value, const char* name) {
  if (value.empty()) {
    throw Failure{PSHARD_ERR_ENVIRONMENT,
                  std::string("pshard: ") + name +
                      " is not set: start this program with `pshard launch ... -- CMD` or `pshard task/slurm ... -- "
                      "CMD` (docs/PYTHON.md)"};
  }
  return value;
}

void write_tensor_list(const pshard_client* c) {
  if (c->env.run_dir.empty()) return;
  std::string text;
  for (const pshard::TensorSpec& t : c->tensors) text += t.name + "\n";
  try {
    pshard::binary::write_file_atomically(c->env.run_dir + "/" + kTensorListFile, text, "tensor list");
  } catch (const std::exception& e) {
    PSHARD_LOG(kWarn) << e.what() << " (a rank whose model differs will not be told which tensor)";
  }
}

// " (the first difference: tensor 2 is 'fc2.weight[10,128]' here, 'fc2.weight[128,10]' on rank 0)", or "" when
// rank 0's list cannot be read.
static std::string first_difference(const pshard_client* c) {
  std::vector<std::string> theirs;
  try {
    std::stringstream lines(pshard::binary::read_file(c->env.run_dir + "/" + kTensorListFile, "tensor list"));
    for (std::string line; std::getline(lines, line);) theirs.push_back(line);
  } catch (const std::exception&) {
    return "";
  }
  const size_t n = std::max(theirs.size(), c->tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string here = i < c->tensors.size() ? "'" + c->tensors[i].name + "'" : "none";
    const std::string there = i < theirs.size() ? "'" + theirs[i] + "'" : "none";
    if (here != there) {
      return " (the first difference: tensor " + std::to_string(i) + " is " + here + " here, " + there +
             " on rank 0; " + std::to_string(c->tensors.size()) + " tensors here, " + std::to_string(theirs.size()) +
             " on rank 0)";
    }
  }
  return "";
}

// A failed request: the job's abort, when there is one, is the cause worth naming.
int request_failed(pshard_client* c, const std::exception& e, pshard_request r) {
  const std::string reason = c->aborted();
  if (!reason.empty()) return fail(PSHARD_ERR_ABORTED, "pshard: the job was aborted: " + reason);
  const std::string what = e.what();
  const auto* refused = dynamic_cast<const pshard::KvError*>(&e);
  if (refused != nullptr && refused->code() == pshard::protocol::ErrorCode::ALREADY_INITIALIZED) {
    std::lock_guard<std::mutex> lock(c->requests_mu);
    if (c->fallback_inits.count(r) != 0) return PSHARD_OK;  // rank 0 initialised those slices before it died
  }
  if (refused != nullptr && refused->code() == pshard::protocol::ErrorCode::LAYOUT_MISMATCH && c->rank() != 0) {
    return fail(PSHARD_ERR_SERVER, "pshard: the tensors of rank " + std::to_string(c->rank()) +
                                       " (names, shapes, order) differ from rank 0's" + first_difference(c) + ": " +
                                       what);
  }
  return fail(PSHARD_ERR_SERVER, what);
}

}  // namespace pshard::capi
