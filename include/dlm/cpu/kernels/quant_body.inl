// dlm/cpu/kernels/quant_body.inl — products with block-quantized weights (GGUF Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K), written once for every instruction set: the layouts and the arithmetic are in
// quant/layout.hpp.
//
// Included by body.inl (inside an instruction-set namespace and target region) after the file
// defined, besides body.inl's names:
//   mr_q                        rows of activations per register tile
//   dot_u8(acc, w, a4)          acc + Σ_b w[4l+b]·a[b] per 32-bit lane l: w unsigned bytes, a the 4
//                               signed bytes at a4 (vpdpbusd, or vpmaddubsw + vpmaddwd)
//   dot_s8(acc, w, a4)          the same with w signed, plus s8_bias · Σ_b a[b] (vpdpbusd takes
//   s8_bias                     w + 128 unsigned: 128; the other forms 0)
//   widen_u8(p), widen_s8(p)    `lanes` bytes zero- / sign-extended to 32 bits (vpmovzxbd, vpmovsxbd)
//   dot_pairs(acc, c16, s2)     acc + lo16(c)·lo16(s) + hi16(c)·hi16(s) per 32-bit lane, signed
//                               halves, s the word at s2 broadcast (vpdpwssd, or vpmaddwd + vpaddd)
// and, where DLM_KERNEL_I16_SUMS is defined (vpmaddubsw forms), the 16-bit primitives:
//   dot_u8_16(acc16, w, a4)     per 16-bit lane h: acc16 + w[2h]·a[2h mod 4] + w[2h+1]·a[2h+1 mod 4]
//   sum_pairs(x16, s16)         per 32-bit lane: the products of x16's and s16's 16-bit halves, summed
// The activations' 4 bytes and pair words come by address, so that an instruction set can take
// them as a broadcast memory operand (vector_ops.inl's load_word loads one where it cannot).
// Every sum of products is an integer sum (exact, whatever the instruction), and each block ends
// with the same short sequence of f32 operations on every instruction set, none of them fused into
// an FMA (the products pass through `unfused`), so every path computes the same bits.

/// Vectors per 16 rows of W.
inline constexpr int q_vectors = static_cast<int>(quant::tile_rows) / lanes;
static_assert(q_vectors * lanes == quant::tile_rows, "a tile's 16 rows must fill whole vectors");

[[nodiscard]] inline vbytes load_bytes(const std::byte* p) noexcept {
    vbytes v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
/// `lanes` bytes, one per row of W, widened to 32-bit integers (sign-extended if `Signed`).
template <bool Signed>
[[nodiscard]] inline vint widen(const std::byte* p) noexcept {
    return Signed ? widen_s8(p) : widen_u8(p);
}
/// `v` as a value the compiler cannot see into, in a vector register (an empty asm that may change it).
template <class V>
[[nodiscard]] inline V opaque(V v) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+v"(v));  // "v": any of AVX-512's 32 registers ("x" would force the first 16, and copies)
#elif defined(__aarch64__)
    __asm__("" : "+w"(v));
#endif
    return v;
}
/// `p` as a pointer the compiler cannot see through (in a general register): loads through it are
/// not merged with loads through `p` elsewhere (volatile: nor is one call merged with another).
template <class T>
[[nodiscard]] inline T* opaque(T* p) noexcept {
    __asm__ volatile("" : "+r"(p));
    return p;
}
/// A product passed through it is rounded on its own, never fused with the addition that takes it
/// (-ffp-contract=fast would fuse it on FMA targets only, and the paths would differ). (A `#pragma
/// GCC optimize` would also stop inlining.)
[[nodiscard]] inline vfloat unfused(vfloat v) noexcept { return opaque(v); }
/// The integer sums of a block are added in order, one product at a time, into one accumulator per
/// (row, vector). Without it GCC reassociates the unrolled sums into a tree whose 64 partial products
/// (8 quads × 4 rows × 2 vectors on AVX2) do not fit the 16 registers and go through the stack.
/// (Integer sums are exact in any order: no bit depends on it.)
[[nodiscard]] inline vint in_register(vint v) noexcept { return opaque(v); }
[[nodiscard]] inline vint vint_broadcast(std::int32_t x) noexcept {
    vint v;
    for (int i = 0; i < lanes; ++i) v[i] = x;
    return v;
}

/// Two 16-bit integers in one 32-bit word: `lo` in the low half, `hi` in the high one.
[[nodiscard]] constexpr std::int32_t pack_pair(std::int32_t lo, std::int32_t hi) noexcept {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint16_t>(lo)) |
                                     static_cast<std::uint32_t>(static_cast<std::uint16_t>(hi)) << 16);
}

/// Bytes of `lanes` quants (the narrowing of a vint).
using vquants = std::int8_t __attribute__((vector_size(lanes)));
static_assert(16 % lanes == 0, "a 16-sum spans whole vectors");

/// The largest |x| of b[0, block), or NaN where the block holds a NaN or an infinity: the
/// magnitudes' bits compared as integers (the order of non-negative floats, with an infinity's and
/// a NaN's bits above every finite value's). Exact, so any order gives the same value.
[[nodiscard]] inline float block_amax(const float* b, int block) noexcept {
    const vint magnitude = vint_broadcast(0x7fffffff);
    vint top{};
    for (int i = 0; i < block; i += lanes) {
        const vint v = __builtin_bit_cast(vint, vload(b + i)) & magnitude;
        top = v > top ? v : top;
    }
    const std::int32_t bits = vmax_lanes(top);
    return bits >= 0x7f800000 ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(bits);
}

/// One row's block b[0, block) quantized: quants to row_q, the sums of each 16 to s16.
inline void quantize_block(const float* b, int block, float inv, std::int8_t* row_q, std::int32_t* s16) noexcept {
    constexpr float magic = 12582912.0f;  // 1.5·2^23: (p + magic) − magic is p rounded to nearest even
    const vfloat vinv = vbroadcast(inv), vmagic = vbroadcast(magic);
    for (int u = 0; u < block / 16; ++u) {
        vint sum{};
        for (int i = u * 16; i < u * 16 + 16; i += lanes) {
            // The product rounded on its own (`unfused`): an FMA would round x·inv + magic once
            // and give the odd neighbour of a product that rounds to j + ½.
            const vint q = __builtin_convertvector((unfused(vload(b + i) * vinv) + vmagic) - vmagic, vint);
            const vquants bytes = __builtin_convertvector(q, vquants);
            std::memcpy(row_q + i, &bytes, sizeof bytes);
            sum += q;
        }
        std::int32_t total = 0;
        for (int l = 0; l < lanes; ++l) total += sum[l];
        s16[u] = total;
    }
}

/// Quantizes X[m × k] per row and block of `block` (quant/layout.hpp, activation_view): scale
/// amax/127, quants round(x · 127/amax) to nearest even, the product rounded before the rounding
/// (never fused), sums of each 16 quants and their 16-bit pairs (a block holding a NaN or an
/// infinity: scale NaN, quants and sums 0, so that it makes the row's products NaN as an f32
/// product would); tiles of MR rows, a row's quants `group` bytes side by side (group divides the
/// block). The same arithmetic on every instruction set (the rounding by the 1.5·2^23 trick is
/// exact for |x · 127/amax| <= 127), so the same quants.
template <int MR>
inline void quantize_rows(index_t m, index_t k, const float* x, std::ptrdiff_t ldx, int block, int group, std::int8_t* q, float* scale,
                          std::int32_t* sums, std::int32_t* pairs) noexcept {
    const index_t blocks = k / block;
    [[maybe_unused]] const bool parallel = static_cast<double>(m) * k > 1e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t row = 0; row < m; ++row) {
        const index_t tile = row / MR;
        const int r = static_cast<int>(row % MR);
        const float* src = x + row * ldx;
        for (index_t s = 0; s < blocks; ++s) {
            const float* b = src + s * block;
            const float amax = block_amax(b, block);
            const std::size_t ts = static_cast<std::size_t>(tile * blocks + s);
            scale[ts * MR + r] = amax / 127.0f;
            alignas(64) std::int8_t row_q[256];
            std::int32_t s16[16];
            if (!std::isnan(amax)) {
                quantize_block(b, block, amax > 0 ? 127.0f / amax : 0.0f, row_q, s16);
            } else {  // a NaN or an infinity: scale NaN, quants 0, so the row's products come out NaN
                std::memset(row_q, 0, static_cast<std::size_t>(block));
                std::fill(s16, s16 + block / 16, 0);
            }
            std::int8_t* qt = q + ts * static_cast<std::size_t>(block) * MR;
            if (group == 4)  // the vector kernels' quads: one 32-bit store each
                for (int i = 0; i < block; i += 4) std::memcpy(qt + (i * MR + 4 * r), row_q + i, 4);
            else
                for (int i = 0, g = 0; i < block; i += group, ++g)
                    std::memcpy(qt + (g * MR + r) * group, row_q + i, static_cast<std::size_t>(group));
            std::int32_t* st = sums + ts * static_cast<std::size_t>(block / 16) * MR;
            for (int u = 0; u < block / 16; ++u) st[u * MR + r] = s16[u];
            std::int32_t* pt = pairs + ts * static_cast<std::size_t>(quant::pair_words(block)) * MR;
            for (int p = 0; p < block / 32; ++p) pt[p * MR + r] = pack_pair(s16[2 * p], s16[2 * p + 1]);
            for (int p = 0; p < block / 64; ++p)
                pt[(block / 32 + p) * MR + r] = pack_pair(s16[4 * p] + s16[4 * p + 1], s16[4 * p + 2] + s16[4 * p + 3]);
        }
    }
}

/// The per-sub-block coefficients c_j of the integer sum a K-quant block's f32 step subtracts,
/// Σ_j c_j·S_j (m_j, S_j = Σ_{k∈j} a for Q4_K, Q5_K; sc_j, S_j over 16 k for Q6_K), for sub-blocks
/// 2p and 2p + 1 as 16-bit pairs in each 32-bit lane (dot_pairs' layout), for vector v of the tile at w.
template <io::gguf_type T>
[[nodiscard]] inline vint sub_coefficient_pair(const std::byte* w, int p, int v) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    static_assert(G.scales, "only the K-quants subtract per-sub-block sums");
    const std::byte* c = w + (G.mins ? G.m_at : G.sc_at) + 2 * p * quant::tile_rows + v * lanes;
    const vint lo = widen<!G.mins>(c), hi = widen<!G.mins>(c + quant::tile_rows);
    return (lo & 0xffff) | (hi << 16);
}

/// Σ_j c_j·S_j (sub_coefficient_pair) of one block for MR rows of A against vector v's `lanes`
/// rows of W: msum[r], from the rows' pair words at `pairs` (the block's first, the next row 1
/// apart, the next pair `amr` apart), a 16-bit pair multiply-add per two sub-blocks. Integer sums:
/// the same value whatever the order.
template <io::gguf_type T, int MR>
inline void quant_block_msums(const std::byte* w, int v, const std::int32_t* pairs, int amr, vint (&msum)[MR]) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int word0 = G.sub == 16 ? 0 : G.block / 32, n_pairs = G.subs() / 2;  // 16-sum pairs (Q6_K) or 32-sum pairs
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) msum[r] = vint{};
    #pragma GCC unroll 8
    for (int p = 0; p < n_pairs; ++p) {
        const vint c = sub_coefficient_pair<T>(w, p, v);
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) msum[r] = dot_pairs(msum[r], c, pairs + (word0 + p) * amr + r);
    }
}

/// The multiple of Σa by which a kernel's integer sum for Q8_0 or Q4_0 exceeds Σ(q − offset)·a:
/// Q4_0's offset 8 where the sums take u (not u − 8), for Q8_0's signed q the kernel's bias (what it
/// added to make q unsigned); 0 for the K-quants, whose steps subtract sub-block sums instead.
template <io::gguf_type T>
[[nodiscard]] constexpr int sum_offset(int bias) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    return G.scales ? 0 : G.signed_q ? bias : G.offset;
}

/// One block's f32 step for one row of A against `lanes` rows of W, the same on every instruction
/// set and kernel form (the AMX kernels call it too): with the block's integer sums ksum (Σ_j sc_j
/// Σ_{k∈j} u_k a_k, or Σ u_k a_k) and msum (quant_block_msums; 0 for Q8_0, Q4_0),
///   t = d·(ksum − Off·Σa)                Q8_0, Q4_0 (Off: sum_offset; 0 where ksum is already
///                                        Σ(q − offset)·a, as amx-int8's signed Q4_0 bytes make it)
///   t = d·ksum − dmin·msum               Q4_K, Q5_K
///   t = d·(ksum − 32·msum)               Q6_K
/// and acc + da·t, each product rounded on its own: the same integer, the same bits, whatever Off.
template <io::gguf_type T, int Off>
[[nodiscard]] inline vfloat quant_block_finish(vfloat acc, vint ksum, vint msum, vfloat d, vfloat dmin, const std::int32_t* sums, int amr,
                                               float da) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    static_assert(Off == 0 || !G.scales, "the K-quants' integer sums carry no offset of Σa");
    vfloat t;
    if constexpr (!G.scales) {
        const vint x = Off == 0 ? ksum : ksum - vint_broadcast(Off * (sums[0] + sums[amr]));
        t = d * __builtin_convertvector(x, vfloat);
    } else if constexpr (G.mins) {
        const vfloat t1 = unfused(d * __builtin_convertvector(ksum, vfloat));
        const vfloat t2 = unfused(dmin * __builtin_convertvector(msum, vfloat));
        t = t1 - t2;
    } else {
        t = d * __builtin_convertvector(ksum - msum * G.offset, vfloat);
    }
    return acc + unfused(vbroadcast(da) * t);
}

/// quant_block_finish for the types without sub-block sums to subtract (Q8_0, Q4_0).
template <io::gguf_type T, int Off>
[[nodiscard]] inline vfloat quant_block_step(vfloat acc, vint ksum, vfloat d, const std::int32_t* sums, int amr, float da) noexcept {
    static_assert(!quant::geometry(T).scales, "the K-quants' step takes their sub-block sums (quant_block_msums)");
    return quant_block_finish<T, Off>(acc, ksum, vint{}, d, vfloat{}, sums, amr, da);
}

/// The `lanes` quants of vector v (of the tile's 16 rows) in 64-byte chunk `quad` of the tile at w
/// (k = 4·quad .. 4·quad + 3 of each row): u as bytes, or Q8_0's signed q.
template <io::gguf_type T>
[[nodiscard]] inline vbytes quad_bytes(const std::byte* w, int quad, int v) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    const std::byte* qs = w + G.header_bytes + v * lanes * 4;
    if constexpr (G.bits == 8) {
        return load_bytes(qs + quad * 64);
    } else {
        const vbytes raw = load_bytes(qs + quad / 2 * 64);
        vbytes u = quad % 2 ? raw >> 4 : raw & 0xf;
        if constexpr (G.high_bits() > 0) {
            // The quad's high bits (Q5_K: bit quad % 8; Q6_K: bits 2·(quad % 4), + 1) moved to bit 4
            // (and 5) of each byte, above the low 4: shifted in 16-bit lanes (x86 has no byte shifts) and masked, which
            // drops what crossed from the other byte.
            using vu16 = std::uint16_t __attribute__((vector_size(sizeof(vbytes))));
            const vu16 high = __builtin_bit_cast(vu16, load_bytes(w + G.high_at() + v * lanes * 4 + quad / G.high_quads() * 64));
            const int shift = G.high_bits() * (quad % G.high_quads());
            u |= __builtin_bit_cast(vbytes, shift <= 4 ? high << (4 - shift) : high >> (shift - 4)) & static_cast<std::uint8_t>(G.high_mask() << 4);
        }
        return u;
    }
}

/// sc_j of sub-block j for vector v's lanes (1 for the types without scales).
template <io::gguf_type T>
[[nodiscard]] inline vint sub_scale(const std::byte* w, int j, int v) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    if constexpr (!G.scales) return vint_broadcast(1);
    const std::byte* sc_at = w + G.sc_at + j * quant::tile_rows + v * lanes;
    return T == io::gguf_type::q6_k ? widen<true>(sc_at) : widen<false>(sc_at);
}

/// Adds sub-block j's Σ_{k∈j} u_k·a_k (times sc_j for the K-quants) of the tile at w, for the VN
/// vectors of W's rows from v0, to ksum[r][v] for the MR rows of A whose quads are at a (a tile of
/// mr_q rows): one dot_u8 / dot_s8 per quad, row and vector.
template <io::gguf_type T, int MR, int VN>
inline void quant_sub_sums(const std::byte* w, const std::int8_t* a, int j, int v0, vint (&ksum)[MR][VN]) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int quads = G.sub / 4;
    vint isum[MR][VN];
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 16
        for (int v = 0; v < VN; ++v) isum[r][v] = vint{};
#pragma GCC unroll 8
    for (int t = 0; t < quads; ++t) {
        vbytes q[VN];
        #pragma GCC unroll 16
        for (int v = 0; v < VN; ++v) q[v] = quad_bytes<T>(w, j * quads + t, v0 + v);
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const std::int8_t* a4 = a + ((j * quads + t) * mr_q + r) * 4;
            #pragma GCC unroll 16
            for (int v = 0; v < VN; ++v) isum[r][v] = in_register(G.signed_q ? dot_s8(isum[r][v], q[v], a4) : dot_u8(isum[r][v], q[v], a4));
        }
    }
    #pragma GCC unroll 16
    for (int v = 0; v < VN; ++v) {
        const vint sc = sub_scale<T>(w, j, v0 + v);
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) ksum[r][v] += G.scales ? isum[r][v] * sc : isum[r][v];
    }
}

#if defined(DLM_KERNEL_I16_SUMS)
/// Quads of unsigned quants whose 16-bit pair sums (dot_u8_16) add up without overflow, a divisor
/// of a sub-block's quads: each adds at most 2·u_max·127 per 16-bit lane (8 for 4-bit quants, 4
/// for Q5_K, 2 for Q6_K).
[[nodiscard]] constexpr int i16_run(const quant::tile_geometry& g) noexcept {
    int run = g.sub / 4;
    while (run > 1 && run * 2 * g.u_max() * 127 > 32767) run /= 2;
    return run;
}

/// quant_sub_sums for unsigned quants where the instruction set sums u8·s8 pairs to 16 bits
/// (vpmaddubsw without VNNI): the products stay in 16-bit lanes for a run of quads (i16_run, never
/// saturating) and are widened once per run by a vpmaddwd that also applies sc_j, half the
/// multiplier work of widening every quad. The same integer sums, so the same bits.
template <io::gguf_type T, int MR, int VN>
inline void quant_sub_sums_i16(const std::byte* w, const std::int8_t* a, int j, int v0, vint (&ksum)[MR][VN]) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int quads = G.sub / 4, run = i16_run(G);
    static_assert(!G.signed_q && quads % run == 0, "16-bit runs take unsigned quants and tile a sub-block's quads");
    vint sc16[VN];
    #pragma GCC unroll 16
    for (int v = 0; v < VN; ++v) {
        const vint sc = sub_scale<T>(w, j, v0 + v);
        sc16[v] = (sc & 0xffff) | (sc << 16);  // sc_j in both 16-bit halves of each lane
    }
#pragma GCC unroll 8
    for (int t0 = 0; t0 < quads; t0 += run) {
        vint acc16[MR][VN];
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < VN; ++v) acc16[r][v] = vint{};
#pragma GCC unroll 8
        for (int t = t0; t < t0 + run; ++t) {
            vbytes u[VN];
            #pragma GCC unroll 16
            for (int v = 0; v < VN; ++v) u[v] = quad_bytes<T>(w, j * quads + t, v0 + v);
            #pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
                const std::int8_t* a4 = a + ((j * quads + t) * mr_q + r) * 4;
                #pragma GCC unroll 16
                for (int v = 0; v < VN; ++v) acc16[r][v] = in_register(dot_u8_16(acc16[r][v], u[v], a4));
            }
        }
        #pragma GCC unroll 16
        for (int r = 0; r < MR; ++r)
            #pragma GCC unroll 16
            for (int v = 0; v < VN; ++v) ksum[r][v] += sum_pairs(acc16[r][v], sc16[v]);
    }
}
#endif

/// Whether quant_micro_kernel sums type T's products in 16-bit runs (quant_sub_sums_i16).
template <io::gguf_type T>
inline constexpr bool i16_form =
#if defined(DLM_KERNEL_I16_SUMS)
    !quant::geometry(T).signed_q;
#else
    false;
#endif

/// C[MR × n_valid] = A[MR × blocks·block] · Wᵀ for one tile column (16 rows of W, `blocks` tiles
/// along k at w); A quantized and packed in tiles of mr_q rows (quant::activation_view; MR of them
/// used), its quants at aq, scales at ascale, sums at asums, sum pairs at apairs. Block s also
/// prefetches the bytes [pf + s · pf_step, pf + (s + 1) · pf_step) into L2 (the next tile column;
/// pf_step 0: none).
/// A block's vectors of W's rows are taken together where their sums fit the registers (the
/// 32-bit form; the 16-bit one up to 4 rows × vectors), else a vector at a time, so that one
/// vector's sums are live (A's quads are then loaded again for each: `opaque`, or the compiler
/// keeps them all, in the stack). The tile stride is the constant mr_q, so that every load of A
/// has a constant offset.
template <io::gguf_type T, int MR>
inline void quant_micro_kernel(const std::int8_t* aq, const float* ascale, const std::int32_t* asums, const std::int32_t* apairs,
                               const std::byte* w, index_t blocks, float* c, std::ptrdiff_t ldc, int n_valid, const char* pf,
                               std::ptrdiff_t pf_step) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int NV = q_vectors, VN = i16_form<T> && MR * NV > 4 ? 1 : NV, sums16 = G.block / 16, amr = mr_q;
    constexpr int words = quant::pair_words(G.block);
    vfloat acc[MR][NV];
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[r][v] = vfloat{};
    for (index_t s = 0; s < blocks; ++s, w += G.tile_bytes()) {
        const std::int8_t* a = aq + s * G.block * amr;
        const std::int32_t* sums = asums + s * sums16 * amr;
        for (std::ptrdiff_t off = 0; off < pf_step; off += 64) __builtin_prefetch(pf + s * pf_step + off, 0, 2);
        #pragma GCC unroll 16
        for (int v0 = 0; v0 < NV; v0 += VN) {
            vint ksum[MR][VN];
            #pragma GCC unroll 16
            for (int r = 0; r < MR; ++r)
                #pragma GCC unroll 16
                for (int v = 0; v < VN; ++v) ksum[r][v] = vint{};
            const std::int8_t* av = opaque(a);
            for (int j = 0; j < G.subs(); ++j) {
#if defined(DLM_KERNEL_I16_SUMS)
                if constexpr (i16_form<T>) {
                    quant_sub_sums_i16<T, MR, VN>(w, av, j, v0, ksum);
                    continue;
                }
#endif
                quant_sub_sums<T, MR, VN>(w, av, j, v0, ksum);
            }
            #pragma GCC unroll 16
            for (int v = v0; v < v0 + VN; ++v) {
                const vfloat d = load_f16(reinterpret_cast<const std::uint16_t*>(w) + v * lanes);
                const vfloat dmin = G.mins ? load_f16(reinterpret_cast<const std::uint16_t*>(w) + quant::tile_rows + v * lanes) : vfloat{};
                vint msum[MR]{};
                if constexpr (G.scales) quant_block_msums<T, MR>(w, v, apairs + s * words * amr, amr, msum);
                #pragma GCC unroll 16
                for (int r = 0; r < MR; ++r)
                    acc[r][v] = quant_block_finish<T, sum_offset<T>(s8_bias)>(acc[r][v], ksum[r][v - v0], msum[r], d, dmin, sums + r, amr, ascale[s * amr + r]);
            }
        }
    }
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) {
            const int valid = n_valid - v * lanes;
            if (valid >= lanes) vstore(c + r * ldc + v * lanes, acc[r][v]);
            else if (valid > 0) vstore_partial(c + r * ldc + v * lanes, acc[r][v], valid);
        }
}

template <io::gguf_type T>
using quant_kernel_fn = void (*)(const std::int8_t*, const float*, const std::int32_t*, const std::int32_t*, const std::byte*, index_t, float*,
                                 std::ptrdiff_t, int, const char*, std::ptrdiff_t) noexcept;
template <io::gguf_type T, std::size_t... I>
constexpr std::array<quant_kernel_fn<T>, sizeof...(I)> make_quant_kernels(std::index_sequence<I...>) {
    return {&quant_micro_kernel<T, static_cast<int>(I) + 1>...};
}
/// quant_kernels<T>[r - 1] handles a tile of r rows.
template <io::gguf_type T>
inline constexpr auto quant_kernels = make_quant_kernels<T>(std::make_index_sequence<mr_q>{});

/// A comes in tiles of mr_q rows (quant_entry's layout: quantize_rows<mr_q>), a constant the
/// kernels' loads of A are addressed by.
template <io::gguf_type T>
inline void gemm_quant_typed(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1,
                             float* c, std::ptrdiff_t ldc) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    const std::size_t group_bytes = static_cast<std::size_t>(b.blocks) * static_cast<std::size_t>(G.tile_bytes());
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(b.blocks) * G.block * mr_q;
    // While the row tiles run over one tile column, their blocks prefetch the next column's bytes
    // into L2, a share per tile (as gemm_panels does for B): the weights come from DRAM.
    const index_t tiles = (m + mr_q - 1) / mr_q;
    const std::ptrdiff_t share = (static_cast<std::ptrdiff_t>(group_bytes) + tiles - 1) / tiles;
    const std::ptrdiff_t pf_step = b.blocks > 0 ? (share + b.blocks - 1) / b.blocks : 0;
    for (index_t g = g0; g < g1; ++g) {
        const index_t col = g * quant::tile_rows;
        if (col >= n) break;
        const int n_valid = static_cast<int>(n - col < quant::tile_rows ? n - col : quant::tile_rows);
        const bool last = g + 1 >= g1 || col + quant::tile_rows >= n;
        const char* next = reinterpret_cast<const char*>(b.data + static_cast<std::size_t>(g + 1) * group_bytes);
        for (index_t i = 0; i < m; i += mr_q) {
            const index_t rows = m - i < mr_q ? m - i : mr_q, tile = i / mr_q;
            quant_kernels<T>[static_cast<std::size_t>(rows - 1)](a.q + tile * a_tile, a.scale + tile * b.blocks * mr_q,
                                                                 a.sums + tile * b.blocks * (G.block / 16) * mr_q,
                                                                 a.pairs + tile * b.blocks * quant::pair_words(G.block) * mr_q,
                                                                 b.data + static_cast<std::size_t>(g) * group_bytes, b.blocks, c + i * ldc + col,
                                                                 ldc, n_valid, next + tile * share, last ? 0 : pf_step);
        }
    }
}

/// C[m × n] = A · Wᵀ for the tile columns [g0, g1) of one part of W (n rows).
inline void gemm_quant(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1, float* c,
                       std::ptrdiff_t ldc) noexcept {
    switch (b.type) {
        case io::gguf_type::q8_0: gemm_quant_typed<io::gguf_type::q8_0>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q4_0: gemm_quant_typed<io::gguf_type::q4_0>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q4_k: gemm_quant_typed<io::gguf_type::q4_k>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q5_k: gemm_quant_typed<io::gguf_type::q5_k>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q6_k: gemm_quant_typed<io::gguf_type::q6_k>(m, n, a, b, g0, g1, c, ldc); break;
        default: break;
    }
}

