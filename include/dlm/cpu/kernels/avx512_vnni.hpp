// dlm/cpu/kernels/avx512_vnni.hpp — kernels for x86-64 with AVX-512 F/BW/DQ/VL and VNNI but no
// BF16 (Cascade Lake, Ice Lake, Tiger Lake, Rocket Lake: most of the cloud's AVX-512 fleet before
// Sapphire Rapids): the quantized products by vpdpbusd and vpdpwssd as on avx512-bf16 (one
// instruction for what vpmaddubsw, vpmaddwd and vpaddd do on avx512); f32, f16 and bf16 products
// as in avx512.hpp (bf16 as two FMAs per pair).
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../../io/dtype.hpp"
#include "../simd.hpp"
#include "table.hpp"

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c"
#include "target_begin.inl"

namespace dlm::cpu::kernels_avx512_vnni {

inline constexpr isa isa_id = isa::avx512_vnni;
inline constexpr const char* isa_name = "avx512-vnni";
#include "avx512_common.inl"
#include "vnni_ops.inl"

#include "body.inl"

}  // namespace dlm::cpu::kernels_avx512_vnni

#include "target_end.inl"

#endif
