// Instruction-set selection for the CPU kernels: which paths exist, which one runs, and a way for
// tests and benchmarks to force one. Internal to Conflux (not installed).
#pragma once

#include <string_view>

#include "kernels/cpu/reduce.h"

namespace conflux::cpu {

/// Instruction sets the CPU kernels are built for, from the most portable to the widest.
enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2 };
inline constexpr int kNumIsas = 3;

/// "scalar", "avx2" or "avx512".
const char* isaName(Isa isa);

/// True when this build has the path and this CPU (and OS) can run it. Scalar is always supported.
/// avx2 needs AVX2 + F16C; avx512 needs AVX-512 F/BW/VL/DQ (+ F16C).
bool isaSupported(Isa isa);

/// The path the dispatcher uses now: the widest supported one (AVX2 rather than AVX-512 on AMD CPUs,
/// where AVX-512 measured slower for these memory-bound kernels), unless CONFLUX_CPU_ISA
/// (scalar, avx2, avx512) or forceIsa() chose another.
Isa activeIsa();

/// Makes reduceFunction()/copy() use `isa` from now on (for tests and benchmarks). Returns false and
/// changes nothing when the ISA is not supported. Function pointers obtained earlier keep their path.
bool forceIsa(Isa isa);

/// forceIsa by name: "scalar", "avx2", "avx512", or "auto" (what activeIsa() starts with). False if unknown
/// or unsupported.
bool forceIsa(std::string_view name);

/// The kernel of a given path, whatever the active one is; nullptr when `isa` is unsupported.
ReduceFn reduceFunction(Isa isa, DataType type, RedOp op);

/// The PreMulSum kernel of a given path; nullptr when `isa` is unsupported.
PremulFn premulSumFunction(Isa isa, DataType type);

}  // namespace conflux::cpu
