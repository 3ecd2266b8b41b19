// AVX2 path (+ F16C): 256-bit registers, 8 floats / 4 doubles per register. Built with
// -mavx2 -mf16c and run only where the dispatcher found AVX2 and F16C. 64-bit integer products
// stay on the portable loop (AVX2 has no 64-bit low multiply). Internal linkage except fillAvx2Table.
#include <immintrin.h>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vector_loop.h"

namespace conflux::cpu::detail {
namespace {

constexpr int kRoundNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// Stores a register's bits: plain unaligned store, or (kStream) a non-temporal store, which needs
/// p aligned to the register size (the vector loop guarantees it).
template <bool kStream>
CFX_INLINE void putBits(void* p, __m256i v) {
  if constexpr (kStream) _mm256_stream_si256(static_cast<__m256i*>(p), v);
  else _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}
template <bool kStream>
CFX_INLINE void putBits(void* p, __m128i v) {
  if constexpr (kStream) _mm_stream_si128(static_cast<__m128i*>(p), v);
  else _mm_storeu_si128(static_cast<__m128i*>(p), v);
}

// ---- float32 accumulators (float32, float16, bfloat16 storage) ----
struct F32Ops {
  using R = __m256;
  static R sum(R a, R b) { return _mm256_add_ps(a, b); }
  static R prod(R a, R b) { return _mm256_mul_ps(a, b); }
  // IEEE 754-2019 maximum/minimum (see reduce_ops.h). _mm256_max_ps returns b on NaN or equality;
  // equal lanes take a AND b (max: +0 wins) / a OR b (min: -0 wins); NaN lanes take a + b (quiet).
  static R max(R a, R b) {
    R m = _mm256_blendv_ps(_mm256_max_ps(a, b), _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(m, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  static R min(R a, R b) {
    R m = _mm256_blendv_ps(_mm256_min_ps(a, b), _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(m, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
};

struct F32 : F32Ops {
  using T = float;
  static constexpr size_t kWidth = 8;
  static R load(const void* p) { return _mm256_loadu_ps(static_cast<const float*>(p)); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm256_castps_si256(v)); }
};

struct F16 : F32Ops {
  using T = Float16;
  static constexpr size_t kWidth = 8;
  static R load(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm256_cvtps_ph(v, kRoundNearest)); }
};

struct BF16 : F32Ops {
  using T = Bfloat16;
  static constexpr size_t kWidth = 8;
  // Widening keeps signalling NaNs signalling (unlike bf16BitsToFloat), which no result can show:
  // every op quiets NaNs before they are stored.
  static R load(const void* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  // Round to nearest even in integer arithmetic, as floatToBf16Bits does; NaN lanes keep their top
  // half with the quiet bit set. Lanes hold 0..0xFFFF, so the unsigned-saturating pack is exact.
  template <bool kStream>
  static void store(void* p, R v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    putBits<kStream>(p, packed);
  }
};

struct F64 {
  using T = double;
  using R = __m256d;
  static constexpr size_t kWidth = 4;
  static R load(const void* p) { return _mm256_loadu_pd(static_cast<const double*>(p)); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm256_castpd_si256(v)); }
  static R sum(R a, R b) { return _mm256_add_pd(a, b); }
  static R prod(R a, R b) { return _mm256_mul_pd(a, b); }
  static R max(R a, R b) {
    R m = _mm256_blendv_pd(_mm256_max_pd(a, b), _mm256_and_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(m, _mm256_add_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
  static R min(R a, R b) {
    R m = _mm256_blendv_pd(_mm256_min_pd(a, b), _mm256_or_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(m, _mm256_add_pd(a, b), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
};

// ---- integers (sum/prod wrap: the vector adds and low-half multiplies are modular) ----
template <class Elem>
struct IntBase {
  using T = Elem;
  using R = __m256i;
  static constexpr size_t kWidth = 32 / sizeof(Elem);
  static R load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, v); }
  static R band(R a, R b) { return _mm256_and_si256(a, b); }
  static R bor(R a, R b) { return _mm256_or_si256(a, b); }
  static R bxor(R a, R b) { return _mm256_xor_si256(a, b); }
};

struct I8 : IntBase<int8_t> {
  static R sum(R a, R b) { return _mm256_add_epi8(a, b); }
  static R max(R a, R b) { return _mm256_max_epi8(a, b); }
  static R min(R a, R b) { return _mm256_min_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  static R sum(R a, R b) { return _mm256_add_epi8(a, b); }
  static R max(R a, R b) { return _mm256_max_epu8(a, b); }
  static R min(R a, R b) { return _mm256_min_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  static R sum(R a, R b) { return _mm256_add_epi32(a, b); }
  static R prod(R a, R b) { return _mm256_mullo_epi32(a, b); }
  static R max(R a, R b) { return _mm256_max_epi32(a, b); }
  static R min(R a, R b) { return _mm256_min_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  static R sum(R a, R b) { return _mm256_add_epi32(a, b); }
  static R prod(R a, R b) { return _mm256_mullo_epi32(a, b); }
  static R max(R a, R b) { return _mm256_max_epu32(a, b); }
  static R min(R a, R b) { return _mm256_min_epu32(a, b); }
};
// 64-bit max/min: AVX2 only compares signed 64-bit; unsigned flips the sign bits first.
struct I64 : IntBase<int64_t> {
  static R sum(R a, R b) { return _mm256_add_epi64(a, b); }
  static R max(R a, R b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b)); }
  static R min(R a, R b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
};
struct U64 : IntBase<uint64_t> {
  static R gt(R a, R b) {
    const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ULL));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
  }
  static R sum(R a, R b) { return _mm256_add_epi64(a, b); }
  static R max(R a, R b) { return _mm256_blendv_epi8(b, a, gt(a, b)); }
  static R min(R a, R b) { return _mm256_blendv_epi8(a, b, gt(a, b)); }
};

/// 256-bit non-temporal copy: aligns the destination to 64 bytes, streams whole lines, fences.
void streamCopy256(void* dst, const void* src, size_t bytes) {
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
  for (; bytes >= 128; bytes -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  for (; bytes >= 32; bytes -= 32, d += 32, s += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  _mm_sfence();
  memcpy(d, s, bytes);
}

}  // namespace

void fillAvx2Table(KernelTable& table) {
  installVector<I8>(table, DataType::Int8);
  installVector<U8>(table, DataType::Uint8);
  installVector<I32>(table, DataType::Int32);
  installVector<U32>(table, DataType::Uint32);
  installVector<I64>(table, DataType::Int64);
  installVector<U64>(table, DataType::Uint64);
  installVector<F16>(table, DataType::Float16);
  installVector<F32>(table, DataType::Float32);
  installVector<F64>(table, DataType::Float64);
  installVector<BF16>(table, DataType::Bfloat16);
  installPremul(table);
  table.streamCopy = &streamCopy256;
}

}  // namespace conflux::cpu::detail
