// dlm/io/gguf_types.hpp — the tensor element types a GGUF file can name (ggml's type ids, as the
// file stores them), with their block geometry.
//
// ggml stores a row of a tensor as blocks: a block of `gguf_block_size(t)` elements takes
// `gguf_type_size(t)` bytes (f32/f16/bf16: blocks of one element; Q8_0/Q4_0: 32; K-quants: 256).
// A row's element count must be a multiple of the block size. The ids and sizes are those of
// ggml's type table (ggml.c type_traits; gguf-py's GGML_QUANT_SIZES agrees except for Q8_1,
// which it lists as 40 bytes where ggml's block_q8_1 is 36). Which types dlm can multiply is not this header's business:
// the reader accepts every type below, the loader refuses those it has no kernel for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dtype.hpp"

namespace dlm::io {

/// ggml's tensor type ids (the values stored in a GGUF tensor info).
enum class gguf_type : std::uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
    q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
    iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22, iq4_xs = 23,
    i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
    tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40, q1_0 = 41,
};

/// A type's block: `elements` per block, stored in `bytes`; name as ggml prints it.
struct gguf_type_traits {
    std::string_view name;
    std::uint32_t elements = 0;
    std::uint32_t bytes = 0;
};

/// The traits of type id `id`, or nullopt for an id ggml does not define (a corrupt or newer file).
[[nodiscard]] constexpr std::optional<gguf_type_traits> gguf_traits(std::uint32_t id) noexcept {
    switch (static_cast<gguf_type>(id)) {
        case gguf_type::f32: return gguf_type_traits{"F32", 1, 4};
        case gguf_type::f16: return gguf_type_traits{"F16", 1, 2};
        case gguf_type::q4_0: return gguf_type_traits{"Q4_0", 32, 18};
        case gguf_type::q4_1: return gguf_type_traits{"Q4_1", 32, 20};
        case gguf_type::q5_0: return gguf_type_traits{"Q5_0", 32, 22};
        case gguf_type::q5_1: return gguf_type_traits{"Q5_1", 32, 24};
        case gguf_type::q8_0: return gguf_type_traits{"Q8_0", 32, 34};
        case gguf_type::q8_1: return gguf_type_traits{"Q8_1", 32, 36};
        case gguf_type::q2_k: return gguf_type_traits{"Q2_K", 256, 84};
        case gguf_type::q3_k: return gguf_type_traits{"Q3_K", 256, 110};
        case gguf_type::q4_k: return gguf_type_traits{"Q4_K", 256, 144};
        case gguf_type::q5_k: return gguf_type_traits{"Q5_K", 256, 176};
        case gguf_type::q6_k: return gguf_type_traits{"Q6_K", 256, 210};
        case gguf_type::q8_k: return gguf_type_traits{"Q8_K", 256, 292};
        case gguf_type::iq2_xxs: return gguf_type_traits{"IQ2_XXS", 256, 66};
        case gguf_type::iq2_xs: return gguf_type_traits{"IQ2_XS", 256, 74};
        case gguf_type::iq3_xxs: return gguf_type_traits{"IQ3_XXS", 256, 98};
        case gguf_type::iq1_s: return gguf_type_traits{"IQ1_S", 256, 50};
        case gguf_type::iq4_nl: return gguf_type_traits{"IQ4_NL", 32, 18};
        case gguf_type::iq3_s: return gguf_type_traits{"IQ3_S", 256, 110};
        case gguf_type::iq2_s: return gguf_type_traits{"IQ2_S", 256, 82};
        case gguf_type::iq4_xs: return gguf_type_traits{"IQ4_XS", 256, 136};
        case gguf_type::i8: return gguf_type_traits{"I8", 1, 1};
        case gguf_type::i16: return gguf_type_traits{"I16", 1, 2};
        case gguf_type::i32: return gguf_type_traits{"I32", 1, 4};
        case gguf_type::i64: return gguf_type_traits{"I64", 1, 8};
        case gguf_type::f64: return gguf_type_traits{"F64", 1, 8};
        case gguf_type::iq1_m: return gguf_type_traits{"IQ1_M", 256, 56};
        case gguf_type::bf16: return gguf_type_traits{"BF16", 1, 2};
        case gguf_type::tq1_0: return gguf_type_traits{"TQ1_0", 256, 54};
        case gguf_type::tq2_0: return gguf_type_traits{"TQ2_0", 256, 66};
        case gguf_type::mxfp4: return gguf_type_traits{"MXFP4", 32, 17};
        case gguf_type::nvfp4: return gguf_type_traits{"NVFP4", 64, 36};
        case gguf_type::q1_0: return gguf_type_traits{"Q1_0", 128, 18};
    }
    return std::nullopt;
}

/// Elements per block of a type the enum names.
[[nodiscard]] constexpr std::uint32_t gguf_block_size(gguf_type t) noexcept { return gguf_traits(static_cast<std::uint32_t>(t))->elements; }
/// Bytes per block.
[[nodiscard]] constexpr std::uint32_t gguf_type_size(gguf_type t) noexcept { return gguf_traits(static_cast<std::uint32_t>(t))->bytes; }
/// "Q8_0", as ggml prints it.
[[nodiscard]] constexpr std::string_view gguf_type_name(gguf_type t) noexcept { return gguf_traits(static_cast<std::uint32_t>(t))->name; }
/// Bytes of a row of `cols` elements (`cols` a multiple of the block size).
[[nodiscard]] constexpr std::size_t gguf_row_bytes(gguf_type t, std::int64_t cols) noexcept {
    return static_cast<std::size_t>(cols) / gguf_block_size(t) * gguf_type_size(t);
}

/// The plain element type (F32, F16, BF16) as dlm's dtype; nullopt for block-quantized and other types.
[[nodiscard]] constexpr std::optional<dtype> gguf_plain_dtype(gguf_type t) noexcept {
    switch (t) {
        case gguf_type::f32: return dtype::f32;
        case gguf_type::f16: return dtype::f16;
        case gguf_type::bf16: return dtype::bf16;
        default: return std::nullopt;
    }
}

static_assert(gguf_row_bytes(gguf_type::q8_0, 64) == 68, "two Q8_0 blocks of 32 elements take 2 x 34 bytes");
static_assert(gguf_row_bytes(gguf_type::q4_k, 256) == 144, "a Q4_K super-block of 256 elements takes 144 bytes");

}  // namespace dlm::io
