// CurveZMQ keys (generation, the 0600 key file) and the CURVE client set-up.
#include "common/transport/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

#include "common/config/config.h"
#include "common/error.h"
#include "common/util/binary_file.h"
#include "common/util/private_file.h"

namespace pshard::transport {
namespace {

constexpr size_t kZ85KeyChars = 40;
const char* const kFields[] = {"server_public", "server_secret", "client_public", "client_secret"};

std::string errno_text() { return std::strerror(errno); }

// The key file's text.
std::string key_file_text(const CurveKeys& keys) {
  std::string text =
      "# pshard CurveZMQ keys of one job (Z85). Secret: keep this file mode 0600 and share it only with the job's "
      "nodes.\n";
  const std::string* values[] = {&keys.server_public, &keys.server_secret, &keys.client_public, &keys.client_secret};
  for (size_t i = 0; i < 4; ++i) text += std::string(kFields[i]) + " = " + *values[i] + "\n";
  return text;
}

void make_key_dir(const std::string& key_dir) {
  std::filesystem::path dir(key_dir);
  if (dir.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(dir.parent_path(), ec);
  }
  if (::mkdir(key_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Error("cannot create the CurveZMQ key directory " + key_dir + ": " + errno_text());
  }
}

}  // namespace

bool curve_available() { return zmq_has("curve") != 0; }

void require_curve(const std::string& what) {
  if (!curve_available()) {
    int major = 0, minor = 0, patch = 0;
    zmq_version(&major, &minor, &patch);
    throw Error(what + ": security.curve is on, but this libzmq (" + std::to_string(major) + "." +
                std::to_string(minor) + "." + std::to_string(patch) +
                ") was built without CURVE (libsodium); install a libzmq with CURVE or set security.curve = false");
  }
}

bool decode_curve_key(const std::string& z85, std::array<uint8_t, 32>& out) {
  return z85.size() == kZ85KeyChars && zmq_z85_decode(out.data(), z85.c_str()) != nullptr;
}

CurveKeys generate_curve_keys() {
  require_curve("generating CurveZMQ keys");
  char pub[41], sec[41];
  CurveKeys k;
  if (zmq_curve_keypair(pub, sec) != 0) throw Error("zmq_curve_keypair failed: " + std::string(zmq_strerror(errno)));
  k.server_public = pub;
  k.server_secret = sec;
  if (zmq_curve_keypair(pub, sec) != 0) throw Error("zmq_curve_keypair failed: " + std::string(zmq_strerror(errno)));
  k.client_public = pub;
  k.client_secret = sec;
  return k;
}

std::string curve_key_file(const std::string& key_dir) { return key_dir + "/curve.keys"; }

void write_curve_keys(const std::string& key_dir, const CurveKeys& keys) {
  make_key_dir(key_dir);
  binary::write_file_atomically(curve_key_file(key_dir), key_file_text(keys), "CurveZMQ key file", 0600);
}

CurveKeys read_curve_keys(const std::string& key_dir) {
  const std::string path = curve_key_file(key_dir);
  struct stat st {};
  // Anyone who can write the directory can replace the key file with one they know the secret of.
  if (::stat(key_dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
    throw Error("CurveZMQ key directory " + key_dir + " has mode " + mode_string(st.st_mode) +
                ": anyone can replace the key file in it; refusing to use it (chmod 700 " + key_dir + ")");
  }
  if (::stat(path.c_str(), &st) != 0) {
    throw Error("CurveZMQ key file " + path + ": " + errno_text() +
                " (security.curve is on: `pshard launch` and task 0 of `pshard slurm` create it; every process of "
                "the job needs the same key directory, --key-dir or security.key_dir)");
  }
  if (!S_ISREG(st.st_mode)) throw Error("CurveZMQ key file " + path + " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    throw Error("CurveZMQ key file " + path + " is owned by uid " + std::to_string(st.st_uid) +
                ", not by this user (uid " + std::to_string(::geteuid()) + "): refusing to use it");
  }
  if ((st.st_mode & 077) != 0) {
    throw Error("CurveZMQ key file " + path + " has mode " + mode_string(st.st_mode) +
                ": it holds the job's secret keys and must be readable only by its owner; refusing to use it (chmod "
                "600 " +
                path + ")");
  }
  std::istringstream in(binary::read_file(path, "CurveZMQ key file", 64 << 10));
  std::map<std::string, std::string> values;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');  // Z85 text may contain '=': split at the first one
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    if (eq == std::string::npos) {
      throw Error("CurveZMQ key file " + path + ", line " + std::to_string(line_no) + ": expected NAME = KEY");
    }
    values[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  CurveKeys k;
  std::string* fields[] = {&k.server_public, &k.server_secret, &k.client_public, &k.client_secret};
  for (size_t i = 0; i < 4; ++i) {
    auto it = values.find(kFields[i]);
    std::array<uint8_t, 32> bin{};
    if (it == values.end() || !decode_curve_key(it->second, bin)) {
      throw Error("CurveZMQ key file " + path + ": " + kFields[i] + " is missing or not a 40-character Z85 key");
    }
    *fields[i] = it->second;
  }
  // Each public key must belong to its secret key (a truncated or hand-edited file fails here).
  for (size_t i = 0; i < 4; i += 2) {
    char derived[41];
    if (zmq_curve_public(derived, fields[i + 1]->c_str()) != 0 || *fields[i] != derived) {
      throw Error("CurveZMQ key file " + path + ": " + kFields[i] + " does not match " + kFields[i + 1]);
    }
  }
  return k;
}

CurveKeys ensure_curve_keys(const std::string& key_dir) {
  const std::string path = curve_key_file(key_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    make_key_dir(key_dir);
    // If another process created the file meanwhile, both use that one.
    binary::create_file_atomically(path, key_file_text(generate_curve_keys()), "CurveZMQ key file", 0600);
  }
  return read_curve_keys(key_dir);
}

std::string curve_key_dir(const Config& cfg, const std::string& key_dir_flag, const std::string& run_dir) {
  std::string dir = key_dir_flag;
  if (dir.empty()) dir = cfg.get_string("security.key_dir");
  if (dir.empty() && !run_dir.empty()) dir = run_dir + "/keys";
  if (dir.empty()) return "";
  return std::filesystem::absolute(dir).lexically_normal().string();
}

CurveKeys job_curve_keys(const Config& cfg, const std::string& key_dir) {
  if (!cfg.get_bool("security.curve")) return {};
  require_curve("CurveZMQ");
  if (key_dir.empty()) {
    throw Error(
        "security.curve is on but no key directory is known: pass --key-dir DIR, set security.key_dir, or give "
        "--run-dir (the keys are then RUN_DIR/keys/curve.keys)");
  }
  return read_curve_keys(key_dir);
}

void apply_curve_client(zmq::socket_t& socket, const CurveKeys& keys) {
  if (!keys.enabled()) return;
  require_curve("CurveZMQ client");
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public);
  socket.set(zmq::sockopt::curve_publickey, keys.client_public);
  socket.set(zmq::sockopt::curve_secretkey, keys.client_secret);
}

}  // namespace pshard::transport
