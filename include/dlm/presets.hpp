// dlm/presets.hpp — the decoders of the literature as compile-time variants of dlm::decoder.
//
//   dlm::presets::cdlm<Model> dec(model);              // reference defaults
//   dlm::presets::llada<Model> dec(model, {32}, {}, {256});  // or any policy options
//
// Only aliases: every policy they name lives in its axis folder. Defaults, and where each comes
// from, are listed in docs/policies.md.
#pragma once

#include "cache/caches.hpp"
#include "decoder.hpp"
#include "mask/block_diffusion.hpp"
#include "mask/masks.hpp"
#include "sampler/samplers.hpp"
#include "schedule/cd4lm.hpp"
#include "schedule/dream.hpp"
#include "schedule/dynamic_threshold.hpp"
#include "schedule/editing.hpp"
#include "schedule/entropy_bound.hpp"
#include "schedule/llada.hpp"
#include "schedule/next_slot.hpp"
#include "schedule/sub_block.hpp"
#include "schedule/threshold.hpp"

namespace dlm::presets {

// The reference policies the presets below name; they live with their axis (sampler/, schedule/).
using dlm::cdlm_schedule;
using dlm::llada21_schedule;
using dlm::llada21_speedy_schedule;
using dlm::cdlm_editing_schedule;
using dlm::fast_dllm_editing_schedule;
using dlm::llada2_schedule;
using dlm::llada_sampler;
using dlm::sdar_sampler;
using dlm::llada2_sampler;

/// Any autoregressive LM: causal mask, exact per-token KV cache, next slot, greedy.
template <class Model>
using autoregressive = decoder<Model, causal_mask, prefix_cache, next_slot_schedule, greedy_sampler>;

/// LLaDA generate.py: bidirectional attention over semi-AR blocks, full recompute, fixed steps per
/// block with low-confidence remasking, Gumbel-max sampling.
template <class Model>
using llada = decoder<Model, semi_ar_mask, no_cache, llada_schedule, llada_sampler>;

/// Dream diffusion_generate: bidirectional, one block, timestep schedule (steps 512, eps 1e-3, origin).
template <class Model>
using dream = decoder<Model, bidirectional_mask, no_cache, dream_schedule, categorical_sampler>;

/// Fast-dLLM v1: semi-AR blocks with the approximate prefix cache refreshed at each block start,
/// threshold 0.9.
template <class Model>
using fast_dllm = decoder<Model, semi_ar_mask, approx_prefix_cache, threshold_schedule, llada_sampler>;

/// Fast-dLLM v1 with the dual cache (prefix and suffix cached).
template <class Model>
using fast_dllm_dual = decoder<Model, semi_ar_mask, dual_cache, threshold_schedule, llada_sampler>;

/// CDLM: block-causal mask (B 32), exact block KV cache, threshold 0.9 inside the block, early stop.
template <class Model>
using cdlm = decoder<Model, block_causal_mask, prefix_cache, cdlm_schedule, greedy_sampler>;

/// CD4LM: semi-AR blocks (B 32), full recompute, confidence-adaptive decoding.
template <class Model>
using cd4lm = decoder<Model, semi_ar_mask, no_cache, cd4lm_schedule, llada_sampler>;

/// SDAR generate.py (block_diffusion_generate, remasking 'low_confidence_dynamic'): the model's
/// block size (config.json block_size, 4 in the published checkpoints), prompt and blocks
/// block-causal, exact K/V of every finished block (the reference's store_kv forward, here produced
/// by the next block's first forward: the same K/V, one forward fewer per block), per block
/// `steps` = block_length planned steps with threshold 0.85, stop after a block holding EOS. Blocks
/// lie on multiples of the block length from position 0, as the reference lays them (aligned_block_diffusion_mask):
/// a prompt that is not whole blocks shares its last block with the first slots.
template <class Model>
using sdar = decoder<Model, aligned_block_diffusion_mask, prefix_cache, dynamic_threshold_schedule, sdar_sampler>;

/// LLaDA2.0 (LLaDA2MoeModelLM.generate, modeling_llada2_moe.py): blocks of 32 laid from the
/// canvas start, prompt included, block-causal (its block_diffusion_attention_mask), decoding from the
/// block that holds the prompt's end (aligned_block_diffusion_mask); every forward there recomputes
/// the prefix, which under this mask is exactly what the cache holds; steps = block length (at most
/// gen_length), threshold 0.95, greedy (temperature 0; llada2_sampler filters only when sampling),
/// stop after a block holding EOS.
template <class Model>
using llada2 = decoder<Model, aligned_block_diffusion_mask, prefix_cache, llada2_schedule, llada2_sampler>;

/// LLaDA 2.1 (LLaDA2MoeModelLM.generate of the LLaDA2.1 checkpoints): llada2's blocks, mask and exact
/// cache, decoded with token editing (llada21_schedule): fills above threshold 0.7 (at least one a
/// forward), edits of filled slots above 0.5, up to 16 forwards that only edit once a block is
/// filled; the block is final (its K/V cached, its text streamed) when the schedule closes it. Greedy,
/// stop after a block holding EOS. The Quality mode; llada21_s is the Speedy one.
template <class Model>
using llada21 = decoder<Model, aligned_block_diffusion_mask, prefix_cache, llada21_schedule, llada2_sampler>;

/// LLaDA 2.1's Speedy mode: as llada21 with threshold 0.5 and editing threshold 0.0 (any changed
/// prediction is taken).
template <class Model>
using llada21_s = decoder<Model, aligned_block_diffusion_mask, prefix_cache, llada21_speedy_schedule, llada2_sampler>;

/// dlm's CDLM decoder with LLaDA 2.1's token editing (an experiment on dlm's own models,
/// docs/results.md): cdlm's mask, cache and sampler; fills above 0.9, edits above 0.9, up to 16
/// edit-only forwards a block, stop after a block holding EOS.
template <class Model>
using cdlm_edit = decoder<Model, block_causal_mask, prefix_cache, cdlm_editing_schedule, greedy_sampler>;

/// Fast-dLLM v1's decoder (semi-AR blocks, approximate prefix cache) with the same token editing (no
/// early stop, as fast_dllm), for the bidirectionally trained teacher and CD4LM student.
template <class Model>
using fast_dllm_edit = decoder<Model, semi_ar_mask, approx_prefix_cache, fast_dllm_editing_schedule, llada_sampler>;

/// Fast-dLLM v2 (Fast_dLLM_QwenForCausalLM.generate / batch_sample, use_block_cache off): the model's
/// bd_size (32), prompt and blocks block-causal with the exact block cache, blocks aligned to
/// position 0 (a prompt that is not whole blocks fills its last block up with slots, decoded without
/// a first slot of their own), each later block's first slot from the previous block's last row,
/// then sub-blocks of 8 with threshold 0.9 (the v2 evaluation's defaults), greedy (temperature 0;
/// llada2_sampler, as sample_with_top_p: the nucleus only when sampling), stop after a block holding EOS.
template <class Model>
using fast_dllm_v2 = decoder<Model, aligned_block_diffusion_mask, prefix_cache, sub_block_threshold_schedule, llada2_sampler>;

/// Fast-dLLM v2 with its sub-block cache (batch_sample / generate() with use_block_cache=True): as
/// fast_dllm_v2, but while a sub-block's first slot is committed a forward recomputes that sub-block
/// only, over the block's K/V from its last full forward (sub_block_cache; approximate).
template <class Model>
using fast_dllm_v2_block_cache = decoder<Model, aligned_block_diffusion_mask, sub_block_cache, sub_block_threshold_schedule, llada2_sampler>;

/// DiffusionGemma (transformers' DiffusionGemmaForBlockDiffusion.generate): canvases of the model's
/// canvas_length, one after another (block_causal_mask; the encoder stores each final canvas in the
/// next canvas's first forward: prefix_cache), each denoised from uniform noise
/// (entropy_bound_schedule: temperature ramp 0.8 → 0.4, entropy bound 0.1, at most 48 steps, stop when
/// the draft is stable and confident, stop after a canvas holding EOS), every slot drawn from its
/// tempered distribution (sdar_sampler: temperature 1, torch.multinomial's distribution). For
/// cpu::diffusion_gemma, which self-conditions on the previous step's tempered logits.
template <class Model>
using diffusion_gemma = decoder<Model, block_causal_mask, prefix_cache, entropy_bound_schedule, sdar_sampler>;

}  // namespace dlm::presets
