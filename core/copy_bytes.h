// copyBytes: memcpy without glibc's slow case on 4K-aliased buffers.
//
// glibc 2.36's x86-64 memcpy copies from about 2 KiB up to its stop threshold (the L2 size on AMD) with
// `rep movsb`. On the AMD EPYC of these machines that instruction ran at 1.7-3 GB/s instead of 30-40
// (4-256 KiB measured) when the destination lay 1-31 bytes past the source modulo 4 KiB; 32 and more,
// or behind, ran at full speed. (Likely 4K aliasing: each store shares its page offset with a load a
// few bytes ahead, which then waits for it.) That is the common case of page-aligned memory (shared-
// memory staging, cfxMemAlloc) copied into a buffer from malloc, whose large blocks start 16 bytes into
// a page, and of such a send buffer copied into an eager slot (its payload starts 32 bytes in). A 16-byte
// vector loop copies those at full speed, so copyBytes takes it there and memcpy everywhere else
// (docs/performance-method.md, "memcpy and 4K aliasing").
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux {

/// memcpy(dst, src, bytes), at full speed whatever the buffers' page offsets. Buffers should not overlap
/// (overlapping ones are copied as by memmove).
void copyBytes(void* dst, const void* src, size_t bytes);

/// Whether copyBytes takes its vector loop for this copy: where glibc's memcpy was measured slow.
bool memcpyAliasesSlowly(const void* dst, const void* src, size_t bytes);

/// Whether `dst` lies 1-31 bytes past the address `src` modulo 4 KiB, where `rep movsb` (glibc's memcpy
/// from 2 KiB, the kernel's process_vm_readv) was measured slow; `src` may be another process's address.
bool storesTrailLoadsBy4KAlias(const void* dst, uintptr_t src);

}  // namespace conflux
