// dlm/cpu/kernels/vector_ops.inl — the vector operations, written once for every width.
//
// Included (no include guard, on purpose) in a namespace that defines `vfloat`, a GCC/Clang
// vector of floats, and `vfma` (a · b + c, fused where the target has FMA): in dlm::cpu by simd.hpp
// for the build's own width, and in each instruction-set namespace (kernels/*.hpp) inside its
// target region. Plain functions, not templates, so that each copy is compiled for its own target
// and no vector crosses a call between targets.
//
// Every lane is computed on its own with a fixed sequence of operations, so a value never depends
// on which lane, row or batch it sits in.

/// 32-bit integers of `vfloat`'s width (comparison results, exponent bits).
using vint = decltype(vfloat{} < vfloat{});
/// Four bytes per 32-bit lane (quantized products, kernels/quant_body.inl).
using vbytes = std::uint8_t __attribute__((vector_size(sizeof(vfloat))));

[[nodiscard]] inline vfloat vload(const float* p) noexcept {
    vfloat v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void vstore(float* p, vfloat v) noexcept { std::memcpy(p, &v, sizeof v); }
/// The 32-bit word at p (4 quantized activations, or a pair of their sums), any alignment.
[[nodiscard]] inline std::int32_t load_word(const void* p) noexcept {
    std::int32_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
}
/// x in every lane. (Not `vfloat{} + x`: 0 + x is not x for x = -0, so that compiles to an add
/// and a shuffle instead of one broadcast, which an FMA takes as a memory operand.)
[[nodiscard]] inline vfloat vbroadcast(float x) noexcept {
    vfloat v;
    for (int i = 0; i < static_cast<int>(sizeof(vfloat) / sizeof(float)); ++i) v[i] = x;
    return v;
}

/// The first `n` lanes from `p`, the others zero.
[[nodiscard]] inline vfloat vload_partial(const float* p, int n) noexcept {
    vfloat v{};
    for (int i = 0; i < n; ++i) v[i] = p[i];
    return v;
}
inline void vstore_partial(float* p, vfloat v, int n) noexcept {
    for (int i = 0; i < n; ++i) p[i] = v[i];
}

[[nodiscard]] inline vfloat vselect(vint mask, vfloat yes, vfloat no) noexcept {
    return __builtin_bit_cast(vfloat, (__builtin_bit_cast(vint, yes) & mask) | (__builtin_bit_cast(vint, no) & ~mask));
}

/// exp(x) per lane, relative error below 3e-7 (Cephes' expf polynomial). exp(x) = 0 below -87,
/// so exp(-inf) = 0 exactly; saturates at exp(88) (about 1.65e38, still finite).
[[nodiscard]] inline vfloat vexp(vfloat x) noexcept {
    const vint underflow = x < vbroadcast(-87.0f);
    x = vselect(x > vbroadcast(88.0f), vbroadcast(88.0f), x);
    x = vselect(underflow, vbroadcast(0.0f), x);
    // n = round(x / ln 2), half away from zero, by truncating conversions (safe under -ffast-math).
    const vfloat t = x * vbroadcast(1.44269504088896341f);
    const vint ni = __builtin_convertvector(t + vselect(t >= vfloat{}, vbroadcast(0.5f), vbroadcast(-0.5f)), vint);
    const vfloat n = __builtin_convertvector(ni, vfloat);
    // Each product and the addition that takes it in one `vfma`: fused wherever the target has FMA,
    // whatever -ffp-contract says (so every FMA path has the same bits; the baseline rounds twice).
    vfloat r = vfma(n, vbroadcast(-0.693359375f), x);
    r = vfma(n, vbroadcast(2.12194440e-4f), r);
    vfloat p = vbroadcast(1.9875691500e-4f);
    p = vfma(p, r, vbroadcast(1.3981999507e-3f));
    p = vfma(p, r, vbroadcast(8.3334519073e-3f));
    p = vfma(p, r, vbroadcast(4.1665795894e-2f));
    p = vfma(p, r, vbroadcast(1.6666665459e-1f));
    p = vfma(p, r, vbroadcast(5.0000001201e-1f));
    p = vfma(p, r * r, r) + vbroadcast(1.0f);
    const vfloat scale = __builtin_bit_cast(vfloat, (ni + 127) << 23);
    return vselect(underflow, vbroadcast(0.0f), p * scale);
}
