// CurveZMQ keys of a job: generation, the key file, and the CURVE client set-up (the server side and its ZAP
// handler are PeerAuthenticator, peer_auth.h).
#pragma once

#include <array>
#include <cstdint>
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
// nothing when `keys` are empty. (apply_client_auth in peer_auth.h picks CURVE or PLAIN for a job.)
void apply_curve_client(zmq::socket_t& socket, const CurveKeys& keys);

// Throws pshard::Error naming `what` and libzmq's version when libzmq has no CURVE.
void require_curve(const std::string& what);

// A 40-character Z85 key as 32 bytes; false when it is not one.
bool decode_curve_key(const std::string& z85, std::array<uint8_t, 32>& out);

}  // namespace pshard::transport
