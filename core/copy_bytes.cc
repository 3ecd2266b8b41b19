#include "core/copy_bytes.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace conflux {
namespace {

constexpr uintptr_t kPageBytes = 4096;
// Destination offsets past the source (modulo a page) that were slow: 1-31 bytes; 32-63 measured fast
// (and an eager slot's payload starts 32 bytes into its page, past a page-aligned send buffer).
constexpr uintptr_t kAliasWindow = 32;
// glibc copies with `rep movsb` from about 2 KiB (2112 bytes with FSRM) up to its stop threshold, the
// L2 size on AMD (512 KiB here, 1 MiB on newer parts); the loop is as fast as memcpy up to 4 MiB
// (measured), so the window ends at 1 MiB, where the library's large copies stream (cpu::copy) anyway.
constexpr size_t kRepMovsbMinBytes = 2048;
constexpr size_t kRepMovsbMaxBytes = size_t{1} << 20;

#if defined(__x86_64__)
// SSE2 (every x86-64 CPU): four 16-byte loads, then four stores, per 64 bytes.
void vectorCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);  // under 64 bytes: no rep movsb
}
#endif

}  // namespace

bool storesTrailLoadsBy4KAlias(const void* dst, uintptr_t src) {
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(dst) - src) % kPageBytes;
  return ahead != 0 && ahead < kAliasWindow;
}

bool memcpyAliasesSlowly(const void* dst, const void* src, size_t bytes) {
  return bytes >= kRepMovsbMinBytes && bytes < kRepMovsbMaxBytes &&
         storesTrailLoadsBy4KAlias(dst, reinterpret_cast<uintptr_t>(src));
}

void copyBytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
#if defined(__x86_64__)
  // The loop copies forwards: overlapping ranges (not allowed, but memcpy's shared memmove code used to
  // forgive them) go to memmove.
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (d > s && d - s < bytes) {
    std::memmove(dst, src, bytes);
    return;
  }
  if (memcpyAliasesSlowly(dst, src, bytes)) {
    vectorCopy(dst, src, bytes);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace conflux
