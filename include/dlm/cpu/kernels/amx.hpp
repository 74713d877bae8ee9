// dlm/cpu/kernels/amx.hpp — kernels for x86-64 with Intel AMX (Sapphire Rapids, Emerald Rapids,
// Granite Rapids): bf16 weights by TDPBF16PS and GGUF block weights by TDPBSUD/TDPBSSD on 16-row
// tiles, with the AVX-512 BF16 kernels (avx512_bf16.hpp) for everything else and for the
// quantized products' epilogues.
//
// bf16: A (activations rounded to bf16) packed in tiles of 16 rows × 32 of k (a_format {16, 32}),
// B read straight from the weights' panels (a k-pair row of a panel is 128 bytes, so a 16 × 16
// tile of B is 16 such rows, 64 bytes each). Each 32 of k is one TDPBF16PS per 16 × 16 of C; C
// stays in tile registers over 1024 of k, then passes through memory as f32 (exactly). The tile
// unit sums the 32 products of each step in its own order (not the pairwise order of vdpbf16ps:
// docs/determinism.md), so amx-bf16 is its own determinism class, still batch-, row- and
// thread-invariant: every row of C is computed by the same instructions whatever m is.
//
// GGUF blocks: activations quantized as on every path (int8, a scale per row and block), packed
// in tiles of 16 rows with a row's 64 quants side by side (32 for Q8_0 and Q4_0's 32-k blocks).
// Q8_0's tiles (quant/layout.hpp) are already AMX B tiles (a 64-byte chunk holds 4 k of 16 rows);
// Q4_0's nibbles are widened to signed bytes u − 8, a chunk of a tile column at a time (16 blocks),
// into a buffer of the calling thread that stays in L1 while every row tile reads it, and one tile
// product per block gives its exact integer sum, the offset already in it. For the K-quants (2
// blocks a chunk) that buffer holds, per k,
// the low and high bytes of sc_j·u, so two tile products over 64 k give a block's Σ sc·u·a without
// a step between sub-blocks; its Σ m_j·S_j (Q6_K: Σ sc_j·S_j) comes from A's sub-block sums in the
// vector unit, as on every path (quant_block_msums). Each block then takes the same f32 step as on
// every instruction set (quant_body.inl, quant_block_finish), so the quantized products give the
// same bits on every path, AMX included.
//
// The tile configuration (amx_config.hpp) is loaded by each kernel call on the calling thread; the OS's permission
// to use the tile data is asked once per process by dispatch.hpp before this path is offered.
//
// The kernels are in amx_body.inl (the GGUF ones in amx_quant_body.inl); this file gives them the
// tile instructions. The tests also compile
// them against a software model of those instructions (tests/support/amx_model.cpp), so that
// their logic is checked on CPUs without AMX too.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../simd.hpp"
#include "amx_config.hpp"
#include "avx512_bf16.hpp"
#include "table.hpp"

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,avx2,fma,f16c"
#include "target_begin.inl"

// The tile instructions as inline assembly with a memory clobber: GCC 12's intrinsics declare no
// memory operand for tileloadd / tilestored (so stores that fill a buffer before a tile load, or
// loads after a tile store, could be moved across them) and only 8 bytes for ldtilecfg.
#define DLM_TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define DLM_TDPBF16PS(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define DLM_TDPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define DLM_TDPBSUD(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define DLM_TILE_CONFIG(config) amx::load_config(config)

namespace dlm::cpu::kernels_amx {

namespace base = kernels_avx512_bf16;

#include "amx_body.inl"

}  // namespace dlm::cpu::kernels_amx

#include "target_end.inl"

#endif
