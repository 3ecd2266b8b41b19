// AVX-512 path (F, BW, VL, DQ + F16C): 512-bit registers, 16 floats / 8 doubles per register.
// Built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c and run only where the dispatcher
// found those features. Everything but fillAvx512Table has internal linkage.
// GCC 12's AVX-512 intrinsics fill unused lanes from _mm512_undefined_*(), a self-initialised
// variable that -Wmaybe-uninitialized reports once inlined (a false positive, GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vector_loop.h"

namespace conflux::cpu::detail {
namespace {

constexpr int kRoundNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

/// Stores a register's bits: plain unaligned store, or (kStream) a non-temporal store, which needs
/// p aligned to the register size (the vector loop guarantees it).
template <bool kStream>
CFX_INLINE void putBits(void* p, __m512i v) {
  if constexpr (kStream) _mm512_stream_si512(static_cast<__m512i*>(p), v);
  else _mm512_storeu_si512(p, v);
}
template <bool kStream>
CFX_INLINE void putBits(void* p, __m256i v) {
  if constexpr (kStream) _mm256_stream_si256(static_cast<__m256i*>(p), v);
  else _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}

// ---- float32 accumulators (float32, float16, bfloat16 storage) ----
struct F32Ops {
  using R = __m512;
  static R sum(R a, R b) { return _mm512_add_ps(a, b); }
  static R prod(R a, R b) { return _mm512_mul_ps(a, b); }
  // IEEE 754-2019 maximum/minimum (see reduce_ops.h). _mm512_max_ps returns b on NaN or equality;
  // equal lanes take a AND b (max: +0 wins) / a OR b (min: -0 wins); NaN lanes take a + b (quiet).
  static R max(R a, R b) {
    R m = _mm512_max_ps(a, b);
    m = _mm512_mask_and_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  }
  static R min(R a, R b) {
    R m = _mm512_min_ps(a, b);
    m = _mm512_mask_or_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};

struct F32 : F32Ops {
  using T = float;
  static constexpr size_t kWidth = 16;
  static R load(const void* p) { return _mm512_loadu_ps(p); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm512_castps_si512(v)); }
};

struct F16 : F32Ops {
  using T = Float16;
  static constexpr size_t kWidth = 16;
  static R load(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm512_cvtps_ph(v, kRoundNearest)); }
};

struct BF16 : F32Ops {
  using T = Bfloat16;
  static constexpr size_t kWidth = 16;
  // Widening keeps signalling NaNs signalling (unlike bf16BitsToFloat), which no result can show:
  // every op quiets NaNs before they are stored.
  static R load(const void* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  // Round to nearest even in integer arithmetic, as floatToBf16Bits does (AVX512-BF16's
  // VCVTNEPS2BF16 would flush subnormals).
  template <bool kStream>
  static void store(void* p, R v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), _mm512_and_si512(hi, _mm512_set1_epi32(1)));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    putBits<kStream>(p, _mm512_cvtepi32_epi16(r));
  }
};

struct F64 {
  using T = double;
  using R = __m512d;
  static constexpr size_t kWidth = 8;
  static R load(const void* p) { return _mm512_loadu_pd(p); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, _mm512_castpd_si512(v)); }
  static R sum(R a, R b) { return _mm512_add_pd(a, b); }
  static R prod(R a, R b) { return _mm512_mul_pd(a, b); }
  static R max(R a, R b) {
    R m = _mm512_max_pd(a, b);
    m = _mm512_mask_and_pd(m, _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_pd(m, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
  }
  static R min(R a, R b) {
    R m = _mm512_min_pd(a, b);
    m = _mm512_mask_or_pd(m, _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ), a, b);
    return _mm512_mask_add_pd(m, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), a, b);
  }
};

// ---- integers (sum/prod wrap: the vector adds and low-half multiplies are modular) ----
template <class Elem>
struct IntBase {
  using T = Elem;
  using R = __m512i;
  static constexpr size_t kWidth = 64 / sizeof(Elem);
  static R load(const void* p) { return _mm512_loadu_si512(p); }
  template <bool kStream>
  static void store(void* p, R v) { putBits<kStream>(p, v); }
  static R band(R a, R b) { return _mm512_and_si512(a, b); }
  static R bor(R a, R b) { return _mm512_or_si512(a, b); }
  static R bxor(R a, R b) { return _mm512_xor_si512(a, b); }
};

struct I8 : IntBase<int8_t> {
  static R sum(R a, R b) { return _mm512_add_epi8(a, b); }
  static R max(R a, R b) { return _mm512_max_epi8(a, b); }
  static R min(R a, R b) { return _mm512_min_epi8(a, b); }
};
struct U8 : IntBase<uint8_t> {
  static R sum(R a, R b) { return _mm512_add_epi8(a, b); }
  static R max(R a, R b) { return _mm512_max_epu8(a, b); }
  static R min(R a, R b) { return _mm512_min_epu8(a, b); }
};
struct I32 : IntBase<int32_t> {
  static R sum(R a, R b) { return _mm512_add_epi32(a, b); }
  static R prod(R a, R b) { return _mm512_mullo_epi32(a, b); }
  static R max(R a, R b) { return _mm512_max_epi32(a, b); }
  static R min(R a, R b) { return _mm512_min_epi32(a, b); }
};
struct U32 : IntBase<uint32_t> {
  static R sum(R a, R b) { return _mm512_add_epi32(a, b); }
  static R prod(R a, R b) { return _mm512_mullo_epi32(a, b); }
  static R max(R a, R b) { return _mm512_max_epu32(a, b); }
  static R min(R a, R b) { return _mm512_min_epu32(a, b); }
};
struct I64 : IntBase<int64_t> {
  static R sum(R a, R b) { return _mm512_add_epi64(a, b); }
  static R prod(R a, R b) { return _mm512_mullo_epi64(a, b); }  // AVX512DQ
  static R max(R a, R b) { return _mm512_max_epi64(a, b); }
  static R min(R a, R b) { return _mm512_min_epi64(a, b); }
};
struct U64 : IntBase<uint64_t> {
  static R sum(R a, R b) { return _mm512_add_epi64(a, b); }
  static R prod(R a, R b) { return _mm512_mullo_epi64(a, b); }
  static R max(R a, R b) { return _mm512_max_epu64(a, b); }
  static R min(R a, R b) { return _mm512_min_epu64(a, b); }
};

/// 512-bit non-temporal copy: aligns the destination to 64 bytes, streams whole lines, fences.
void streamCopy512(void* dst, const void* src, size_t bytes) {
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
  for (; bytes >= 256; bytes -= 256, d += 256, s += 256) {
    const __m512i a = _mm512_loadu_si512(s);
    const __m512i b = _mm512_loadu_si512(s + 64);
    const __m512i c = _mm512_loadu_si512(s + 128);
    const __m512i e = _mm512_loadu_si512(s + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 192), e);
  }
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
  _mm_sfence();
  memcpy(d, s, bytes);
}

}  // namespace

void fillAvx512Table(KernelTable& table) {
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
  table.streamCopy = &streamCopy512;
}

}  // namespace conflux::cpu::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
