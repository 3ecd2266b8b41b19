// divideInPlace: the final step of Avg (the reduction itself runs as Sum).
#include <cstdint>

#include "kernels/cpu/reduce.h"
#include "kernels/cpu/scalar_loop.h"

namespace conflux::cpu {
namespace {

using detail::loadElement;
using detail::storeElement;

/// Integers: C++ division of the stored value (signed rounds toward zero). divisor >= 1.
template <class T>
void divideIntegers(void* data, size_t count, int divisor) {
  using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  const W d = static_cast<W>(divisor);
  for (size_t i = 0; i < count; ++i)
    storeElement<T>(data, i, static_cast<T>(static_cast<W>(loadElement<T>(data, i)) / d));
}

/// float32/float64: one IEEE division per element.
template <class T>
void divideFloats(void* data, size_t count, int divisor) {
  const T d = static_cast<T>(divisor);
  for (size_t i = 0; i < count; ++i) storeElement<T>(data, i, loadElement<T>(data, i) / d);
}

/// float16/bfloat16: widen, divide in float32, round to nearest even.
template <class T>
void divideHalves(void* data, size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i)
    storeElement<T>(data, i, Accumulator<T>::narrow(Accumulator<T>::widen(loadElement<T>(data, i)) / d));
}

}  // namespace

void divideInPlace(DataType type, void* data, size_t count, int divisor) {
  if (divisor <= 1 || count == 0) return;  // divisor < 1 is outside the contract: leave data alone
  switch (type) {
    case DataType::Int8: return divideIntegers<int8_t>(data, count, divisor);
    case DataType::Uint8: return divideIntegers<uint8_t>(data, count, divisor);
    case DataType::Int32: return divideIntegers<int32_t>(data, count, divisor);
    case DataType::Uint32: return divideIntegers<uint32_t>(data, count, divisor);
    case DataType::Int64: return divideIntegers<int64_t>(data, count, divisor);
    case DataType::Uint64: return divideIntegers<uint64_t>(data, count, divisor);
    case DataType::Float16: return divideHalves<Float16>(data, count, divisor);
    case DataType::Float32: return divideFloats<float>(data, count, divisor);
    case DataType::Float64: return divideFloats<double>(data, count, divisor);
    case DataType::Bfloat16: return divideHalves<Bfloat16>(data, count, divisor);
  }
}

}  // namespace conflux::cpu
