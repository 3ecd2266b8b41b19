// Runtime dispatch of the CPU kernels: detects the instruction sets once, builds one kernel table
// per supported path, and serves reduceFunction()/copy() from the active one (CONFLUX_CPU_ISA or
// forceIsa() can pick a narrower path for tests and benchmarks).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(CONFLUX_KERNELS_X86)
#include <cpuid.h>
#endif

#include "core/copy_bytes.h"
#include "core/log.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/reduce.h"

namespace conflux::cpu {
namespace {

#if defined(CONFLUX_KERNELS_X86)
/// F16C straight from CPUID (leaf 1, ECX bit 29): not every compiler's __builtin_cpu_supports knows
/// it. Its YMM state is covered by the AVX2/AVX-512 checks, which include the OS (XCR0) test.
bool cpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool cpuIsAmd() {
#if defined(CONFLUX_KERNELS_X86)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
#else
  return false;
#endif
}

bool cpuCanRun(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return true;
#if defined(CONFLUX_KERNELS_X86)
    // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
    case Isa::Avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && cpuHasF16c();
    case Isa::Avx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             cpuHasF16c();
#else
    default:
      return false;
#endif
  }
  return false;
}

struct Registry {
  bool supported[kNumIsas] = {};
  detail::KernelTable tables[kNumIsas];

  Registry() {
    for (int i = 0; i < kNumIsas; ++i) {
      const Isa isa = static_cast<Isa>(i);
      supported[i] = cpuCanRun(isa);
      if (!supported[i]) continue;
      detail::fillScalarTable(tables[i]);
#if defined(CONFLUX_KERNELS_X86)
      if (isa == Isa::Avx2) detail::fillAvx2Table(tables[i]);
      if (isa == Isa::Avx512) detail::fillAvx512Table(tables[i]);
#endif
    }
  }

  Isa widest() const {
    for (int i = kNumIsas - 1; i > 0; --i)
      if (supported[i]) return static_cast<Isa>(i);
    return Isa::Scalar;
  }

  /// What "auto" runs: the widest path, except AVX2 over AVX-512 on AMD CPUs. Zen 4 executes 512-bit
  /// operations as two 256-bit halves, so these memory-bound kernels gain nothing from AVX-512 there, and
  /// measured end to end (2-rank all-reduce, 1-64 MiB) its non-temporal copies were about 10% slower.
  Isa preferred() const {
    const Isa w = widest();
    if (w == Isa::Avx512 && supported[static_cast<int>(Isa::Avx2)] && cpuIsAmd()) return Isa::Avx2;
    return w;
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

bool parseIsa(std::string_view name, Isa* out) {
  for (int i = 0; i < kNumIsas; ++i) {
    if (name == isaName(static_cast<Isa>(i))) {
      *out = static_cast<Isa>(i);
      return true;
    }
  }
  return false;
}

/// The initial path: CONFLUX_CPU_ISA when set to a supported path, else the preferred one.
Isa initialIsa() {
  const Registry& r = registry();
  const char* env = std::getenv("CONFLUX_CPU_ISA");
  if (env == nullptr || *env == '\0' || std::string_view(env) == "auto") return r.preferred();
  Isa isa;
  if (!parseIsa(env, &isa) || !r.supported[static_cast<int>(isa)]) {
    CFX_WARN(kInit, "CONFLUX_CPU_ISA=%s is unknown or not supported by this CPU; using %s", env,
             isaName(r.preferred()));
    return r.preferred();
  }
  return isa;
}

std::atomic<int>& activeSlot() {
  static std::atomic<int> slot{static_cast<int>(initialIsa())};
  return slot;
}

const detail::KernelTable& activeTable() {
  return registry().tables[activeSlot().load(std::memory_order_relaxed)];
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

bool isaSupported(Isa isa) {
  const int i = static_cast<int>(isa);
  return i >= 0 && i < kNumIsas && registry().supported[i];
}

Isa activeIsa() { return static_cast<Isa>(activeSlot().load(std::memory_order_relaxed)); }

bool forceIsa(Isa isa) {
  if (!isaSupported(isa)) return false;
  activeSlot().store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

bool forceIsa(std::string_view name) {
  if (name == "auto") return forceIsa(registry().preferred());
  Isa isa;
  return parseIsa(name, &isa) && forceIsa(isa);
}

ReduceFn reduceFunction(Isa isa, DataType type, RedOp op) {
  if (!isaSupported(isa) || !isValidDataType(static_cast<int>(type)) || !isKernelRedOp(static_cast<int>(op)))
    return nullptr;
  return registry().tables[static_cast<int>(isa)].reduce[static_cast<int>(type)][detail::kernelOpIndex(op)];
}

ReduceFn reduceFunction(DataType type, RedOp op) { return reduceFunction(activeIsa(), type, op); }

PremulFn premulSumFunction(Isa isa, DataType type) {
  if (!isaSupported(isa) || !isValidDataType(static_cast<int>(type))) return nullptr;
  return registry().tables[static_cast<int>(isa)].premul[static_cast<int>(type)];
}

PremulFn premulSumFunction(DataType type) { return premulSumFunction(activeIsa(), type); }

void reduceStreamingTo(DataType type, RedOp op, void* const* dsts, int ndst, const void* const* srcs, int nsrc,
                       size_t count) {
  if (count == 0 || ndst < 1) return;
  const detail::KernelTable& table = activeTable();
  const int t = static_cast<int>(type), o = detail::kernelOpIndex(op);
  const size_t elt = dataTypeSize(type);
  const uintptr_t misalign = reinterpret_cast<uintptr_t>(dsts[0]) & 63;
  bool onePass = table.fanout[t][o] != nullptr && nsrc >= 2 && ndst <= kMaxFanout && misalign % elt == 0;
  for (int k = 1; k < ndst && onePass; ++k) onePass = (reinterpret_cast<uintptr_t>(dsts[k]) & 63) == misalign;
  if (onePass) {
    table.fanout[t][o](dsts, ndst, srcs, nsrc, count);
    return;
  }
  // No one-pass kernel for this case: reduce into the first destination, stream it to the others.
  table.reduce[t][o](dsts[0], srcs, nsrc, count);
  for (int k = 1; k < ndst; ++k) copyStreaming(dsts[k], dsts[0], count * elt);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes < detail::kStreamThresholdBytes) {
    copyBytes(dst, src, bytes);  // not plain memcpy: core/copy_bytes.h
    return;
  }
  activeTable().streamCopy(dst, src, bytes);
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
  if (bytes < 256) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return;
  }
  activeTable().streamCopy(dst, src, bytes);
}

const char* isaName() { return isaName(activeIsa()); }

}  // namespace conflux::cpu
