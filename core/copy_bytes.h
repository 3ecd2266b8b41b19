// copyBytes: memcpy without glibc's slow case on 4K-aliased buffers.
//
// glibc 2.36's x86-64 memcpy copies from 2 KiB up to about half a MiB with `rep movsb`. On the AMD EPYC
// of these machines that instruction runs at 1.7-3 GB/s instead of 30-40 when the destination lies 1-31
// bytes past the source modulo 4 KiB: every store then shares its page offset with a load a few bytes
// later, and the CPU stalls the load behind it. That is the common case of a page-aligned buffer
// (shared-memory staging, an eager slot, cfxMemAlloc) copied into one from malloc, whose large blocks
// start 16 bytes into a page. A 16-byte vector loop copies those at full speed, so copyBytes takes it
// there and memcpy everywhere else (measured in docs/performance-method.md, "memcpy and 4K aliasing").
#pragma once

#include <cstddef>

namespace conflux {

/// memcpy(dst, src, bytes), at full speed whatever the buffers' page offsets. Buffers must not overlap.
void copyBytes(void* dst, const void* src, size_t bytes);

/// Whether glibc's memcpy would be slow for this copy here (exposed for tests and benchmarks).
bool memcpyAliasesSlowly(const void* dst, const void* src, size_t bytes);

}  // namespace conflux
