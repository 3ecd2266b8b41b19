// The portable path: every (type, op) kernel, plain C++ (the compiler may auto-vectorise it for
// the baseline instruction set), and the baseline streaming copy.
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/scalar_loop.h"

#if defined(CONFLUX_KERNELS_X86)
#include <emmintrin.h>
#endif

namespace conflux::cpu::detail {
namespace {

template <DataType kType>
void fillType(KernelTable& table) {
  using T = typename StorageOf<kType>::Type;
  ReduceFn* row = table.reduce[static_cast<int>(kType)];
  row[kernelOpIndex(RedOp::Sum)] = &reduceScalar<T, RedOp::Sum>;
  row[kernelOpIndex(RedOp::Prod)] = &reduceScalar<T, RedOp::Prod>;
  row[kernelOpIndex(RedOp::Max)] = &reduceScalar<T, RedOp::Max>;
  row[kernelOpIndex(RedOp::Min)] = &reduceScalar<T, RedOp::Min>;
  if constexpr (!isFloatType(kType)) {
    row[kernelOpIndex(RedOp::Band)] = &reduceScalar<T, RedOp::Band>;
    row[kernelOpIndex(RedOp::Bor)] = &reduceScalar<T, RedOp::Bor>;
    row[kernelOpIndex(RedOp::Bxor)] = &reduceScalar<T, RedOp::Bxor>;
  }
}

/// SSE2 non-temporal copy (every x86-64 CPU has SSE2); plain memcpy elsewhere.
void streamCopyBaseline(void* dst, const void* src, size_t bytes) {
#if defined(CONFLUX_KERNELS_X86)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  if (head >= bytes) {
    memcpy(d, s, bytes);
    return;
  }
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  _mm_sfence();
  memcpy(d, s, bytes);
#else
  memcpy(dst, src, bytes);
#endif
}

}  // namespace

void fillScalarTable(KernelTable& table) {
  fillType<DataType::Int8>(table);
  fillType<DataType::Uint8>(table);
  fillType<DataType::Int32>(table);
  fillType<DataType::Uint32>(table);
  fillType<DataType::Int64>(table);
  fillType<DataType::Uint64>(table);
  fillType<DataType::Float16>(table);
  fillType<DataType::Float32>(table);
  fillType<DataType::Float64>(table);
  fillType<DataType::Bfloat16>(table);
  installPremul(table);
  table.streamCopy = &streamCopyBaseline;
}

}  // namespace conflux::cpu::detail
