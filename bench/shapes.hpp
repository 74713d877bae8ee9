// bench/shapes.hpp — the model shapes dlm's benchmarks and checkpoint writer know by name, with the
// config.json each published model ships (so a random checkpoint of that shape loads exactly as
// the real one would).
//
//   tiny      the test fixtures' shape (2 layers, d 48)
//   tiny-k    the smallest LLaDA layout whose rows are whole K-quant blocks of 256 (2 layers, d 256,
//             4 heads of 64, MLP 512, vocabulary 320, untied head): GGUF Q4_K_M tests
//   100M      hidden 768, 12 layers, 12 heads, MLP 2048, vocabulary 32000, tied head (LLaDA layout)
//   168M      the shape of issue 12's llama.cpp comparison: d 1024, 8 layers, 16 heads, MLP 2816,
//             vocabulary 32000, untied head (LLaDA layout)
//   llada-8b  GSAI-ML/LLaDA-8B-Instruct: d 4096, 32 layers, 32 heads, MLP 12288, vocabulary 126464
//   dream-7b  Dream-org/Dream-v0-Instruct-7B (Qwen2.5-7B): d 3584, 28 layers, 28 heads (4 KV heads),
//             MLP 18944, vocabulary 152064, q/k/v biases (also Fast-dLLM v2 7B's shape)
//   sdar-4b   JetAstra SDAR-4B-Chat (training/model/SDAR-4B-Chat/config.json): d 2560, 36 layers,
//             32 heads of 128 (8 KV heads), q/k norms, MLP 9728, vocabulary 151936, block_size 4
//   llada2-mini-64e  LLaDA2.0-mini's block (d 2048, 20 layers, 16 heads of 128 / 4 KV, q/k norms,
//             partial RoPE 0.5, first layer dense 5120, experts of 512, 8 per token in 8 groups of
//             which 4 kept, one shared expert, vocabulary 157184) with 64 of its 256 experts: the
//             same work per token (about 1.4B active parameters) in 4.9B parameters, so that it
//             fits a 24 GB machine in bf16
//   sdar-30b-a3b-16e  SDAR-30B-A3B's block at the sizes of Qwen3-30B-A3B, its base (d 2048, 48 layers, 32 heads of 128 / 4
//             KV, q/k norms, experts of 768, 8 per token, norm_topk_prob, vocabulary 151936,
//             block_size 4) with 16 of its 128 experts: the same work per token (about 3.3B active
//             parameters) in 5.1B parameters (9.5 GiB in bf16)
//   diffusiongemma-26b-a4b  google/diffusiongemma-26B-A4B-it's text model (Gemma 4 26B-A4B): d 2816, 30 layers
//             (25 sliding of window 1024, 5 full), 16 heads of 256 (8 KV) on sliding layers and of 512
//             (2 KV, keys as values) on full ones, a dense GELU MLP of 2112 beside 128 experts of 704,
//             8 per token, vocabulary 262144, canvas 256. The published figures (30 layers, 25 + 5,
//             window 1024, 16/8 heads of 256, 128 experts of 704 top-8 plus a dense MLP, 25.2B
//             parameters, 3.8B active, 210 KiB of K/V a token in bf16) fix d, the MLP and the full
//             layers' heads: 2816 and 2112 give 25.2B and 3.8B, and 25·8·256·2·2 + 5·2·512·2 bytes
//             = 210 KiB. Random weights in Q4_K_M blocks by default (dlm-bench-forward)
//   diffusiongemma-26b-a4b-16e  the same with 16 of its 128 experts: the same work per token in
//             5.2B parameters, so that it fits a 24 GB machine in bf16
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/io/model_config.hpp>

namespace dlm::bench {

struct named_shape {
    std::string name;
    nlohmann::json config;  ///< config.json as the published model (or a model of its layout) has it
    int shards = 1;         ///< safetensors files the published checkpoint is split into
};

/// config.json of a LLaDA-layout model (keys of GSAI-ML/LLaDA-8B-Instruct's config.json).
inline nlohmann::json llada_config(int d, int layers, int heads, int kv_heads, int mlp, int vocab, bool tied, int mask_id, int eos_id,
                                   double theta, int max_len) {
    return {{"architectures", {"LLaDAModelLM"}}, {"model_type", "llada"}, {"activation_type", "silu"}, {"alibi", false},
            {"attention_layer_norm", false}, {"bias_for_layer_norm", false}, {"block_type", "llama"}, {"d_model", d},
            {"embedding_size", vocab}, {"vocab_size", vocab}, {"eos_token_id", eos_id}, {"pad_token_id", eos_id},
            {"mask_token_id", mask_id}, {"include_bias", false}, {"include_qkv_bias", false}, {"input_emb_norm", false},
            {"layer_norm_type", "rms"}, {"layer_norm_with_affine", true}, {"max_sequence_length", max_len}, {"mlp_hidden_size", mlp},
            {"mlp_ratio", 4}, {"n_heads", heads}, {"n_kv_heads", kv_heads}, {"n_layers", layers}, {"rms_norm_eps", 1e-5},
            {"rope", true}, {"rope_theta", theta}, {"scale_logits", false}, {"weight_tying", tied}, {"precision", "amp_bf16"}};
}

/// config.json of a Dream-layout model (keys of Dream-org/Dream-v0-Instruct-7B's config.json).
inline nlohmann::json dream_config(int d, int layers, int heads, int kv_heads, int mlp, int vocab, bool tied, int mask_id, int eos_id,
                                   double theta, int max_len) {
    return {{"architectures", {"DreamModel"}}, {"model_type", "Dream"}, {"hidden_act", "silu"}, {"hidden_size", d},
            {"intermediate_size", mlp}, {"num_hidden_layers", layers}, {"num_attention_heads", heads},
            {"num_key_value_heads", kv_heads}, {"vocab_size", vocab}, {"tie_word_embeddings", tied}, {"mask_token_id", mask_id},
            {"bos_token_id", eos_id}, {"eos_token_id", eos_id}, {"pad_token_id", eos_id}, {"rope_theta", theta},
            {"rope_scaling", nullptr}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", max_len}, {"use_sliding_window", false},
            {"sliding_window", nullptr}, {"attention_dropout", 0.0}, {"torch_dtype", "bfloat16"}};
}

/// config.json of an SDAR model (keys of SDAR-4B-Chat's config.json).
inline nlohmann::json sdar_config(int d, int layers, int heads, int kv_heads, int head_dim, int mlp, int vocab, int block) {
    return {{"architectures", {"SDARForCausalLM"}}, {"model_type", "sdar"}, {"attention_bias", false}, {"block_size", block},
            {"bos_token_id", 151643}, {"eos_token_id", 151643}, {"mask_token_id", 151669}, {"head_dim", head_dim},
            {"hidden_act", "silu"}, {"hidden_size", d}, {"intermediate_size", mlp}, {"max_position_embeddings", 32768},
            {"num_attention_heads", heads}, {"num_hidden_layers", layers}, {"num_key_value_heads", kv_heads}, {"rms_norm_eps", 1e-6},
            {"rope_scaling", nullptr}, {"rope_theta", 1000000}, {"tie_word_embeddings", false}, {"use_sliding_window", false},
            {"vocab_size", vocab}, {"torch_dtype", "bfloat16"}};
}

/// config.json of a LLaDA2 (Bailing-MoE v2) model (LLaDA2.0-mini's keys).
inline nlohmann::json llada2_config(int d, int layers, int heads, int kv_heads, int head_dim, int dense_mlp, int experts, int per_token,
                                    int expert_mlp, int groups, int kept_groups, int vocab) {
    return {{"architectures", {"LLaDA2MoeModelLM"}}, {"model_type", "llada2_moe"}, {"first_k_dense_replace", 1}, {"head_dim", head_dim},
            {"hidden_act", "silu"}, {"hidden_size", d}, {"intermediate_size", dense_mlp}, {"max_position_embeddings", 32768},
            {"moe_intermediate_size", expert_mlp}, {"n_group", groups}, {"norm_head", false}, {"norm_topk_prob", true},
            {"num_attention_heads", heads}, {"num_experts", experts}, {"num_experts_per_tok", per_token}, {"num_hidden_layers", layers},
            {"num_key_value_heads", kv_heads}, {"num_shared_experts", 1}, {"pad_token_id", 156892}, {"eos_token_id", 156892},
            {"partial_rotary_factor", 0.5}, {"rms_norm_eps", 1e-6}, {"rope_theta", 600000}, {"routed_scaling_factor", 2.5},
            {"score_function", "sigmoid"}, {"tie_word_embeddings", false}, {"topk_group", kept_groups}, {"use_bias", false},
            {"use_qk_norm", true}, {"use_qkv_bias", false}, {"vocab_size", vocab}, {"torch_dtype", "bfloat16"}};
}

/// config.json of an SDAR-MoE model (SDAR's keys plus Qwen3-MoE's expert keys).
inline nlohmann::json sdar_moe_config(int d, int layers, int heads, int kv_heads, int head_dim, int mlp, int experts, int per_token,
                                      int expert_mlp, int vocab, int block) {
    nlohmann::json j = sdar_config(d, layers, heads, kv_heads, head_dim, mlp, vocab, block);
    j["architectures"] = {"SDARMoeForCausalLM"};
    j["model_type"] = "sdar_moe";
    j.update({{"num_experts", experts}, {"num_experts_per_tok", per_token}, {"moe_intermediate_size", expert_mlp}, {"norm_topk_prob", true},
              {"decoder_sparse_step", 1}, {"mlp_only_layers", nlohmann::json::array()}});
    return j;
}

/// config.json of a DiffusionGemma model (the keys of DiffusionGemmaForBlockDiffusion's config).
inline nlohmann::json diffusion_gemma_config(int d, int layers, int heads, int kv_heads, int head_dim, int global_kv_heads, int global_head_dim,
                                             int mlp, int experts, int per_token, int expert_mlp, int window, int vocab, int canvas) {
    const nlohmann::json rope = {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
                                 {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}};
    const nlohmann::json text = {{"model_type", "diffusion_gemma_text"}, {"attention_bias", false}, {"bos_token_id", 2}, {"eos_token_id", {1, 106}},
                                 {"pad_token_id", 0}, {"final_logit_softcapping", 30.0}, {"head_dim", head_dim}, {"global_head_dim", global_head_dim},
                                 {"hidden_activation", "gelu_pytorch_tanh"}, {"hidden_size", d}, {"intermediate_size", mlp},
                                 {"max_position_embeddings", 262144}, {"moe_intermediate_size", expert_mlp}, {"num_attention_heads", heads},
                                 {"num_experts", experts}, {"num_hidden_layers", layers}, {"num_key_value_heads", kv_heads},
                                 {"num_global_key_value_heads", global_kv_heads}, {"rms_norm_eps", 1e-6}, {"rope_parameters", rope},
                                 {"sliding_window", window}, {"top_k_experts", per_token}, {"vocab_size", vocab}, {"dtype", "bfloat16"}};
    return {{"architectures", {"DiffusionGemmaForBlockDiffusion"}}, {"model_type", "diffusion_gemma"}, {"canvas_length", canvas},
            {"image_token_id", 258880}, {"tie_word_embeddings", true}, {"text_config", text}};
}

/// Whether a shape is a DiffusionGemma model (its own benchmark, bench/bench_gemma.hpp).
[[nodiscard]] inline bool is_diffusion_gemma(const nlohmann::json& config) { return config.value("model_type", "") == "diffusion_gemma"; }

[[nodiscard]] inline std::vector<named_shape> shapes() {
    return {
        {"tiny", llada_config(48, 2, 6, 2, 80, 300, true, 299, 1, 10000.0, 4096), 1},
        {"tiny-k", llada_config(256, 2, 4, 4, 512, 320, false, 319, 318, 10000.0, 4096), 1},
        {"100M", llada_config(768, 12, 12, 12, 2048, 32000, true, 31999, 1, 10000.0, 4096), 1},
        {"168M", llada_config(1024, 8, 16, 16, 2816, 32000, false, 31999, 1, 10000.0, 4096), 1},
        {"llada-8b", llada_config(4096, 32, 32, 32, 12288, 126464, false, 126336, 126081, 500000.0, 4096), 6},
        {"dream-7b", dream_config(3584, 28, 28, 4, 18944, 152064, false, 151666, 151643, 1000000.0, 131072), 4},
        {"sdar-4b", sdar_config(2560, 36, 32, 8, 128, 9728, 151936, 4), 2},
        {"llada2-mini-64e", llada2_config(2048, 20, 16, 4, 128, 5120, 64, 8, 512, 8, 4, 157184), 1},
        {"sdar-30b-a3b-16e", sdar_moe_config(2048, 48, 32, 4, 128, 6144, 16, 8, 768, 151936, 4), 1},
        {"diffusiongemma-26b-a4b", diffusion_gemma_config(2816, 30, 16, 8, 256, 2, 512, 2112, 128, 8, 704, 1024, 262144, 256), 1},
        {"diffusiongemma-26b-a4b-16e", diffusion_gemma_config(2816, 30, 16, 8, 256, 2, 512, 2112, 16, 8, 704, 1024, 262144, 256), 1},
    };
}

[[nodiscard]] inline std::optional<named_shape> find_shape(std::string_view name) {
    for (named_shape& s : shapes())
        if (s.name == name) return s;
    return std::nullopt;
}

[[nodiscard]] inline std::string shape_names() {
    std::string out;
    for (const named_shape& s : shapes()) out += (out.empty() ? "" : ", ") + s.name;
    return out;
}

}  // namespace dlm::bench
