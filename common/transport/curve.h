// CurveZMQ for a job's sockets: the job's keys, their key file, and client/server socket set-up with a ZAP handler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <zmq.hpp>

namespace pshard {
class Config;
}

namespace pshard::transport {

// The CurveZMQ keys of one job (Z85 text, 40 characters each). Every process of the job holds
// both keypairs: sockets that bind (coordinator, parameter servers) are CURVE servers with the
// server keypair; sockets that connect (every node) are CURVE clients with the client keypair and
// the server public key. Servers accept only the client public key (ZAP), so a peer without the
// job's key file can neither connect nor send. Empty keys: the job runs in plaintext.
struct CurveKeys {
  std::string server_public, server_secret;
  std::string client_public, client_secret;
  bool enabled() const { return !server_secret.empty(); }
};

// True when libzmq was built with CURVE (zmq_has("curve")).
bool curve_available();

// Fresh random keypairs (zmq_curve_keypair). Throws pshard::Error without CURVE.
CurveKeys generate_curve_keys();

// The key file in `key_dir`: key_dir + "/curve.keys".
std::string curve_key_file(const std::string& key_dir);

// Writes the key file (mode 0600, atomically), creating `key_dir` with mode 0700 if needed.
void write_curve_keys(const std::string& key_dir, const CurveKeys& keys);

// Reads the key file. Throws pshard::Error naming the file when it is missing or malformed, not
// owned by this user, or readable or writable by group or others (with its mode, e.g. 0640).
CurveKeys read_curve_keys(const std::string& key_dir);

// Reads the key file, generating and writing it first when it does not exist (what `pshard launch`
// and task 0 of `pshard slurm` do).
CurveKeys ensure_curve_keys(const std::string& key_dir);

// Where a process finds the key file: `key_dir_flag` (--key-dir) when given, else security.key_dir,
// else RUN_DIR/keys; "" when none is known. Relative paths are made absolute.
std::string curve_key_dir(const Config& cfg, const std::string& key_dir_flag, const std::string& run_dir);

// The keys a process of the job uses: empty when security.curve is false, else read from `key_dir`
// (pshard::Error when `key_dir` is "" or the file is refused).
//
//   KvServerOptions opt = KvServerOptions::from_config(cfg);
//   opt.curve = job_curve_keys(cfg, curve_key_dir(cfg, args.get("key-dir"), run_dir));
CurveKeys job_curve_keys(const Config& cfg, const std::string& key_dir);

// Makes a connecting socket a CURVE client of the job's servers. Call before connect(); does
// nothing when `keys` are empty.
void apply_curve_client(zmq::socket_t& socket, const CurveKeys& keys);

// Makes a binding socket a CURVE server and authenticates its clients: a ZAP handler on its own
// thread (bound to inproc://zeromq.zap.01 of `ctx`, so at most one per context) accepts only the
// job's client key, and a socket monitor logs handshakes that fail (plaintext or wrong-mechanism
// peers). Refusals are logged as "<who>: refused ..." (per peer address and kind: the first at once, then a
// count per 10 s; transport::RefusalLog).
// Construct before bind() on the thread that owns `socket`; destroy before `ctx`. Does nothing
// when `keys` are empty.
//
//   zmq::socket_t router(ctx, zmq::socket_type::router);
//   CurveServer curve(ctx, router, keys, "server 0");
//   router.bind("tcp://*:47011");
class CurveServer {
 public:
  CurveServer(zmq::context_t& ctx, zmq::socket_t& socket, const CurveKeys& keys, std::string who);
  ~CurveServer();  // stops and joins the handler thread
  CurveServer(const CurveServer&) = delete;
  CurveServer& operator=(const CurveServer&) = delete;

  uint64_t accepted() const;           // handshakes with the job's client key
  uint64_t refused_keys() const;       // handshakes with another client key (ZAP status 400)
  uint64_t failed_handshakes() const;  // handshakes that failed before ZAP (plaintext peer, wrong server key)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;  // null when the keys are empty
};

}  // namespace pshard::transport
