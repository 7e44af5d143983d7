#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// Names that the data planes leave in shared places (socket directories in the temporary
// folder, shared-memory names) carry an owner tag, so that a later process can tell a name
// whose owner is dead from one still in use and sweep only the former.

namespace arl {

// This process's pid namespace: the inode of /proc/self/ns/pid, 0 when it cannot be read.
// Not cached: a forked child may live in a namespace its parent created.
uint64_t pidNamespaceId();

// True when no process `pid` exists in this pid namespace (kill(pid, 0) fails with ESRCH).
bool processGone(int64_t pid);

// This process's owner tag: "<pid namespace inode>-<pid>", digits and one dash.
std::string ownerTag();

// Parses an owner tag at the start of `s` (what follows it is ignored when it starts with
// '-'). True only when the owner lived in this process's pid namespace and is gone: a name
// from another pid namespace (a container sharing the folder) is never taken for stale.
bool ownerTagGone(std::string_view s);

}  // namespace arl
