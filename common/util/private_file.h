// Files a process acts on without asking (a join file's command line and job token, CurveZMQ keys): trusted only
// when this user owns them and no other user can read or change them.
#pragma once

#include <cstdint>
#include <string>

namespace pshard {

// "0640": the permission bits as chmod takes them.
std::string mode_string(unsigned mode);

// The content of `path` (at most max_bytes), checked on the opened file, not on its name: a regular file (not a
// symbolic link, FIFO or device), owned by this user (effective uid), with no permission for group or others; and in
// a directory that others cannot write. Otherwise an Error naming `what`, the path and its owner or mode, and the fix:
//
//   "join file /r/join.json is owned by uid 1001, not by this user (uid 0): refusing to use it"
std::string read_private_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace pshard
