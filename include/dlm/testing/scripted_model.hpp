// dlm/testing/scripted_model.hpp — a model whose logits are a script: for testing policies and
// decoders without a network.
//
// The script sees, for each output row, the tokens that row may attend to: keys the mask forbids read
// as dlm::no_token, keys inside the forward's window read the current canvas, and keys outside it read
// the token the position held when its K/V were stored (so a stale cache is visible). A forward that
// needs a key which is neither in its window nor stored throws dlm::contract_error. Every plan is
// logged, so tests can assert the exact forwards a decoder ran.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../model/concept.hpp"

namespace dlm::testing {

/// What the script sees for one output row.
struct script_view {
    index_t row = 0;                    ///< canvas position of the output row
    index_t forward = 0;                ///< the model's forward counter (all sequences)
    canvas_layout layout;
    std::span<const token_id> visible;  ///< per key position, the token attended to (no_token: not attended)
};

/// Fills `out` (vocab_size floats) with logits for one row.
using script = std::function<void(const script_view&, std::span<float> out)>;

/// Logits whose softmax puts probability `p` on `token` and spreads the rest evenly.
inline void peaked_logits(std::span<float> out, token_id token, double p) {
    const double rest = (1.0 - p) / static_cast<double>(out.size() - 1);
    for (auto& v : out) v = static_cast<float>(std::log(rest));
    out[static_cast<std::size_t>(token)] = static_cast<float>(std::log(p));
}

class scripted_model {
public:
    /// The "K/V" of a position is modelled by the token it held when stored.
    struct kv_cache {
        std::vector<token_id> tokens;
        std::vector<unsigned char> stored;
    };

    scripted_model(index_t vocab_size, token_id mask_id, std::vector<token_id> eos_ids, bool shift, script s)
        : vocab_(vocab_size), mask_(mask_id), eos_(std::move(eos_ids)), shift_(shift), script_(std::move(s)) {}

    [[nodiscard]] index_t vocab_size() const noexcept { return vocab_; }
    [[nodiscard]] token_id mask_id() const noexcept { return mask_; }
    [[nodiscard]] std::span<const token_id> eos_ids() const noexcept { return eos_; }
    [[nodiscard]] bool logits_shift() const noexcept { return shift_; }
    /// What the model suggests for the settings a user leaves unset (none unless set_decoding_hints).
    [[nodiscard]] const dlm::decoding_hints& decoding_hints() const noexcept { return hints_; }
    void set_decoding_hints(dlm::decoding_hints h) { hints_ = std::move(h); }
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        return {std::vector<token_id>(static_cast<std::size_t>(capacity), no_token),
                std::vector<unsigned char>(static_cast<std::size_t>(capacity), 0)};
    }

    /// The prompt cache's hooks (dlm/cache/prompt_cache.hpp): a store's bytes, and a copy of stored
    /// positions (their tokens) between stores; copying an unstored position is a contract_error.
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept {
        return std::uint64_t(capacity) * (sizeof(token_id) + 1);
    }
    void copy_kv(const kv_cache& src, index_t src_begin, kv_cache& dst, index_t dst_begin, index_t count) const {
        for (index_t i = 0; i < count; ++i) {
            const auto s = static_cast<std::size_t>(src_begin + i), d = static_cast<std::size_t>(dst_begin + i);
            if (s >= src.stored.size() || d >= dst.stored.size() || !src.stored[s])
                throw contract_error("scripted_model::copy_kv: position " + std::to_string(src_begin + i) + " is not stored in the source");
            dst.tokens[d] = src.tokens[s];
            dst.stored[d] = 1;
        }
    }

    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        std::vector<forward_plan> plans;
        std::size_t offset = 0;
        const auto v = static_cast<std::size_t>(vocab_);
        std::vector<token_id> visible;
        for (const auto& rq : requests) {
            const forward_plan& p = rq.plan;
            plans.push_back(p);
            for (index_t row = p.logits_begin; row < p.logits_end; ++row) {
                visible.assign(static_cast<std::size_t>(rq.layout.size()), no_token);
                for (index_t k = 0; k < p.attend_end; ++k) {
                    if (!mask.allowed(rq.layout, row, k)) continue;
                    const auto kk = static_cast<std::size_t>(k);
                    if (k >= p.window_begin && k < p.window_end) {
                        visible[kk] = rq.canvas[kk];
                    } else if (rq.cache != nullptr && rq.cache->stored[kk]) {
                        visible[kk] = rq.cache->tokens[kk];
                    } else {
                        throw contract_error("scripted_model: row " + std::to_string(row) + " needs key " + std::to_string(k) +
                                             ", which is neither in the window [" + std::to_string(p.window_begin) + ", " +
                                             std::to_string(p.window_end) + ") nor cached");
                    }
                }
                script_({row, forwards_, rq.layout, visible}, logits.subspan(offset, v));
                offset += v;
            }
            if (p.stores()) {
                if (rq.cache == nullptr) throw contract_error("scripted_model: a plan stores K/V but the request has no cache");
                for (index_t k = p.store_begin; k < p.store_end; ++k) {
                    rq.cache->tokens[static_cast<std::size_t>(k)] = rq.canvas[static_cast<std::size_t>(k)];
                    rq.cache->stored[static_cast<std::size_t>(k)] = 1;
                }
            }
        }
        log_.push_back(std::move(plans));
        ++forwards_;
    }

    /// Every batched forward so far: the plans of its requests, in order.
    [[nodiscard]] const std::vector<std::vector<forward_plan>>& log() const noexcept { return log_; }
    void clear_log() noexcept {
        log_.clear();
        forwards_ = 0;
    }

private:
    index_t vocab_;
    token_id mask_;
    std::vector<token_id> eos_;
    bool shift_;
    script script_;
    dlm::decoding_hints hints_;
    index_t forwards_ = 0;
    std::vector<std::vector<forward_plan>> log_;
};

static_assert(language_model<scripted_model>);

}  // namespace dlm::testing
