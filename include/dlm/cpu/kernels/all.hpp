// dlm/cpu/kernels/all.hpp — every instruction set's kernels and detail::kernels_of, the table of
// one. Included by dispatch.hpp (inline, header-only use) or, once per program, by definitions.hpp
// (DLM_CPU_KERNELS_SEPARATE).
#pragma once

#include "amx.hpp"
#include "avx2.hpp"
#include "avx512.hpp"
#include "avx512_bf16.hpp"
#include "avx512_vnni.hpp"
#include "baseline.hpp"
#include "table.hpp"

#if defined(DLM_CPU_KERNELS_SEPARATE)
#define DLM_KERNELS_OF_LINKAGE
#else
#define DLM_KERNELS_OF_LINKAGE inline
#endif

namespace dlm::cpu::detail {

DLM_KERNELS_OF_LINKAGE const kernel_table& kernels_of(isa i) noexcept {
#if defined(__x86_64__)
    switch (i) {
        case isa::amx: return kernels_amx::table;
        case isa::avx512_bf16: return kernels_avx512_bf16::table;
        case isa::avx512_vnni: return kernels_avx512_vnni::table;
        case isa::avx512: return kernels_avx512::table;
        case isa::avx2: return kernels_avx2::table;
        case isa::baseline: break;
    }
#endif
    (void)i;
    return kernels_baseline::table;
}

}  // namespace dlm::cpu::detail

#undef DLM_KERNELS_OF_LINKAGE
