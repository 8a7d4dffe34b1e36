// This machine's name, the CPUs this process may use and fresh random identifiers: one helper each, shared by every
// process role.
#pragma once

#include <cstddef>
#include <string>

namespace pshard {

// gethostname(), or "localhost" when it fails.
std::string host_name();

// Where this process can share memory and abstract Unix sockets with others: the machine's boot id and this
// process's network namespace, "<boot id>/net:[4026531992]". Two processes with the same value run on one host in
// one network namespace (what pshard calls the same host); a host name cannot tell two namespaces apart.
std::string host_locality();

// The CPUs this process may run on (its affinity mask: a SLURM task's share, a taskset), at least 1.
int allowed_cpus();

// `bytes` random bytes from the OS (std::random_device: /dev/urandom) as 2*bytes lowercase hex digits.
std::string random_hex(size_t bytes);

// A new job token: 128 random bits as 32 hex digits. Registrations and requests that carry another
// token are refused, so a stray process of another job cannot join this one.
std::string new_job_token();

}  // namespace pshard
