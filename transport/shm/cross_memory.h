// Single-copy reads of a local peer's private memory (Linux cross-memory attach, process_vm_readv).
//
// Buffers a peer cannot map (ordinary heap memory) normally move through shared staging: the owner copies
// them in, the reader copies them out. process_vm_readv lets the kernel copy straight from the owner's
// pages into the reader's, one copy instead of two (two where the kernel's copy would meet 4K aliasing:
// readPeerMemory). It is allowed when the reader may ptrace the owner
// (same user, no Yama restriction above ptrace_scope 0 or a PR_SET_PTRACER grant, not blocked by seccomp
// in a container), so the shared-memory world probes it once at start-up (ShmWorld::crossMemory) and the
// direct plans use it only when every local rank could read every other.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace conflux::shm {

/// The address of a word with a known value in this process, for peers to probe with.
uint64_t crossMemoryProbeAddress();

/// True when this process can read `pid`'s probe word at `probeAddress` (crossMemoryProbeAddress() in
/// that process) with process_vm_readv and finds the expected value; `why` says what failed otherwise.
bool canReadPeerMemory(pid_t pid, uint64_t probeAddress, std::string& why);

/// Copies `bytes` from address `remote` of process `pid` into `dst`, retrying partial transfers. Returns
/// 0, or the errno of the failure (ESRCH: the process is gone; EFAULT: the range is not mapped there).
/// Where the kernel's copy would be slow (kernelCopyAliasesSlowly) it reads through a bounce buffer.
int readPeerMemory(pid_t pid, uint64_t remote, void* dst, uint64_t bytes);

/// Whether the kernel's copy of `bytes` from `remote` to `dst` runs 4-5x slow (measured here): `dst`
/// 1-31 bytes past `remote` modulo 4 KiB, from 2 KiB up (x86-64; false elsewhere). readPeerMemory then
/// reads through a bounce buffer.
bool kernelCopyAliasesSlowly(const void* dst, uint64_t remote, uint64_t bytes);

}  // namespace conflux::shm
