// dlm/server/request.hpp — the body of an OpenAI-style completion request, parsed and checked
// against what the server's preset and model allow, before anything reaches the decoder.
//
//   dlm::server::request_rules rules = ...;          // fixed at start: the preset's options, limits
//   dlm::server::completion_request r = dlm::server::parse_request(body, dlm::server::endpoint::chat, rules);
//
// parse_request never prints, never touches a model and throws only dlm::server::request_error
// (a dlm::invalid_parameter carrying the HTTP status and the OpenAI error fields), so the HTTP layer
// turns every refusal into a 400 whose error object names the field, and a fuzzer can call it
// directly (tests/fuzz/fuzz_server_request.cpp). Unknown fields are refused rather than ignored, so
// that nobody reads an answer believing an option was applied.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/core/config.hpp>
#include <dlm/core/error.hpp>
#include <dlm/io/chat_template.hpp>
#include <dlm/io/json_util.hpp>

namespace dlm::server {

enum class endpoint { completions, chat };

/// A refused request: the HTTP status and the fields of OpenAI's error object
/// {"error": {"message", "type", "param", "code"}}. parameter() is the field ("max_tokens",
/// "messages[1].content"), empty when the body as a whole is wrong.
class request_error : public invalid_parameter {
public:
    request_error(std::string field, std::string why, int status = 400, std::string type = "invalid_request_error",
                  std::string code = {})
        : invalid_parameter(std::move(field), std::move(why)), status_(status), type_(std::move(type)), code_(std::move(code)) {}
    [[nodiscard]] int status() const noexcept { return status_; }
    [[nodiscard]] const std::string& type() const noexcept { return type_; }
    [[nodiscard]] const std::string& code() const noexcept { return code_; }

private:
    int status_;
    std::string type_, code_;
};

struct completion_request;

/// What the server's preset and model let a request set. Fixed at start.
struct request_rules {
    std::string model;            ///< the id GET /v1/models lists; a request naming another model gets 404
    std::string preset = "cdlm";  ///< named in refusals
    bool has_blocks = false;      ///< the mask has blocks whose length a request may choose (the canvas is whole blocks)
    index_t default_max_tokens = 128;  ///< the model's dlm_gen_length, else 128
    index_t max_context = 4096;        ///< the model's context: prompt and canvas together
    index_t max_max_tokens = 4096;     ///< a canvas's slots at most: the model's context, at most max_slots
    index_t block_length = 32;         ///< the server's block length (used when a request gives none)
    std::size_t max_stop = 16;         ///< stop strings per request (OpenAI's limit is 4; lm-eval's until lists may hold more, vLLM has none)
    std::size_t max_stop_bytes = 256;
    std::size_t max_messages = 256;
    /// Checks the decoding options of a parsed request against the preset (dlm-server: the preset
    /// registry's validate, server/preset_rules.hpp), throwing dlm::invalid_parameter naming the
    /// option; parse_request turns that into a 400 naming the field. Unset: no such check.
    std::function<void(const completion_request&)> check_options;
};

/// A request as the decoder will run it: every field checked, the dlm extensions resolved.
struct completion_request {
    endpoint kind = endpoint::completions;
    std::string prompt;                        ///< /v1/completions: its text, or
    std::optional<std::vector<token_id>> prompt_ids;  ///< its token ids (OpenAI's token-id form: [ids] or [[ids]])
    std::vector<io::chat_message> messages;    ///< /v1/chat/completions
    index_t max_tokens = 0;                    ///< answer tokens at most
    std::string max_tokens_field;              ///< the field that set it ("max_tokens", "max_completion_tokens"); empty: the server's default
    index_t gen_length = 0;                    ///< canvas slots: max_tokens rounded up to whole blocks
    std::optional<double> temperature, top_p, threshold;
    std::optional<double> editing_threshold;  ///< dlm extension: a revising schedule's (llada21)
    std::optional<index_t> top_k, steps, block_length;
    std::optional<std::uint64_t> seed;         ///< unset: the next of --seed's sequence (scheduler.hpp's basic_job::draw_seed); a negative one as two's complement
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  ///< stream_options.include_usage: a last chunk with the token counts
    bool stream_canvas = false;  ///< dlm extension: also stream the whole canvas after every forward
    io::chat_thinking thinking = io::chat_thinking::template_default;  ///< chat_template_kwargs.enable_thinking (vLLM's field)
};

/// The request field an engine or registry refusal is about ("gen_length" is the request's
/// max_tokens, a prompt its prompt or messages; the decoding options have the fields' names).
[[nodiscard]] inline std::string field_of(const std::string& engine_param, endpoint kind) {
    if (engine_param == "gen_length") return "max_tokens";
    if (engine_param.starts_with("prompt")) return kind == endpoint::chat ? "messages" : "prompt";
    return engine_param;
}

namespace detail {

[[noreturn]] inline void refuse(const std::string& field, const std::string& why) { throw request_error(field, why); }

inline double number_in(const std::string& field, const nlohmann::json& v, double lo, double hi, bool open_lo) {
    if (!v.is_number()) refuse(field, "must be a number, got " + io::detail::json_kind(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || (open_lo ? x <= lo : x < lo) || x > hi) {
        char range[96];
        std::snprintf(range, sizeof range, "must be in %c%g, %g], got ", open_lo ? '(' : '[', lo, hi);
        refuse(field, range + io::detail::json_quote(v));
    }
    return x;
}

inline std::int64_t integer_in(const std::string& field, const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
    const std::optional<std::int64_t> x = io::detail::json_int64(v);
    if (!x) refuse(field, "must be an integer, got " + (v.is_number() ? io::detail::json_quote(v) : io::detail::json_kind(v)));
    if (*x < lo || *x > hi) refuse(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(*x));
    return *x;
}

inline bool boolean(const std::string& field, const nlohmann::json& v) {
    if (!v.is_boolean()) refuse(field, "must be true or false, got " + io::detail::json_kind(v));
    return v.get<bool>();
}

inline std::string text(const std::string& field, const nlohmann::json& v) {
    if (!v.is_string()) refuse(field, "must be a string, got " + io::detail::json_kind(v));
    return v.get<std::string>();
}

/// A message's content: a string, or OpenAI's list of parts of which only {"type": "text"} is known;
/// the parts' texts are joined with "\n", as vLLM joins them.
inline std::string content_of(const std::string& field, const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) refuse(field, "must be a string or a list of text parts, got " + io::detail::json_kind(v));
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string part = field + "[" + std::to_string(i) + "]";
        const nlohmann::json& p = v[i];
        if (!p.is_object()) refuse(part, "must be an object {\"type\": \"text\", \"text\": ...}");
        for (const auto& [k, _] : p.items())
            if (k != "type" && k != "text") refuse(part + "." + k, "unknown field");
        if (!p.contains("type") || p["type"] != "text") refuse(part + ".type", "must be \"text\" (dlm-server reads text only)");
        if (!p.contains("text")) refuse(part + ".text", "is required");
        if (i > 0) out += '\n';
        out += text(part + ".text", p["text"]);
    }
    return out;
}

inline std::vector<io::chat_message> messages_of(const nlohmann::json& v, const request_rules& rules) {
    if (!v.is_array() || v.empty()) refuse("messages", "must be a non-empty list of {\"role\", \"content\"} objects");
    if (v.size() > rules.max_messages) refuse("messages", "at most " + std::to_string(rules.max_messages) + " messages");
    std::vector<io::chat_message> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string field = "messages[" + std::to_string(i) + "]";
        const nlohmann::json& m = v[i];
        if (!m.is_object()) refuse(field, "must be an object {\"role\", \"content\"}, got " + io::detail::json_kind(m));
        for (const auto& [k, _] : m.items())
            if (k != "role" && k != "content" && k != "name") refuse(field + "." + k, "unknown field");
        if (!m.contains("role")) refuse(field + ".role", "is required");
        if (!m.contains("content")) refuse(field + ".content", "is required");
        const std::string role = text(field + ".role", m["role"]);
        if (role != "system" && role != "user" && role != "assistant" && role != "developer")
            refuse(field + ".role", "must be system, developer, user or assistant, got '" + role.substr(0, 40) + "'");
        if (m.contains("name")) (void)text(field + ".name", m["name"]);
        out.push_back({role == "developer" ? "system" : role, content_of(field + ".content", m["content"])});
    }
    return out;
}

inline std::vector<std::string> stop_of(const nlohmann::json& v, const request_rules& rules) {
    std::vector<std::string> out;
    if (v.is_null()) return out;
    const auto one = [&](const std::string& field, const nlohmann::json& s) {
        std::string t = text(field, s);
        if (t.empty()) refuse(field, "must not be empty");
        if (t.size() > rules.max_stop_bytes) refuse(field, "at most " + std::to_string(rules.max_stop_bytes) + " bytes");
        out.push_back(std::move(t));
    };
    if (v.is_string()) {
        one("stop", v);
    } else if (v.is_array()) {
        if (v.size() > rules.max_stop) refuse("stop", "at most " + std::to_string(rules.max_stop) + " stop strings");
        for (std::size_t i = 0; i < v.size(); ++i) one("stop[" + std::to_string(i) + "]", v[i]);
    } else {
        refuse("stop", "must be a string or a list of strings, got " + io::detail::json_kind(v));
    }
    return out;
}

/// The completions route's prompt: a string, or one prompt as token ids ([ids], or a list of one: [[ids]]
/// or ["text"], as OpenAI's and vLLM's batch form with one member). Several prompts are refused: one
/// request is one sequence. An id must be an integer in [0, 2^31); the engine checks it against the
/// vocabulary and the mask id (400 naming prompt).
inline void prompt_of(const nlohmann::json& v, const request_rules& rules, completion_request& r) {
    if (v.is_string()) {
        r.prompt = v.get<std::string>();
        return;
    }
    if (!v.is_array() || v.empty()) refuse("prompt", "must be a string, a list of token ids, or a list of one of those, got " + (v.is_array() ? std::string("an empty list") : io::detail::json_kind(v)));
    const bool one = v.size() == 1 && (v[0].is_string() || v[0].is_array());
    if (!one && !v[0].is_number()) refuse("prompt", "dlm-server takes one prompt per request, got a list of " + std::to_string(v.size()));
    if (one && v[0].is_string()) {
        r.prompt = v[0].get<std::string>();
        return;
    }
    const nlohmann::json& ids = one ? v[0] : v;
    const std::string field = one ? "prompt[0]" : "prompt";
    if (ids.empty()) refuse(field, "is an empty list of token ids; a prompt needs at least one token");
    if (ids.size() > static_cast<std::size_t>(rules.max_context))
        refuse(field, "holds " + std::to_string(ids.size()) + " token ids, more than the model's context of " + std::to_string(rules.max_context));
    std::vector<token_id> out;
    out.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        out.push_back(static_cast<token_id>(integer_in(field + "[" + std::to_string(i) + "]", ids[i], 0, std::numeric_limits<token_id>::max())));
    r.prompt_ids = std::move(out);
}

}  // namespace detail

namespace detail {

/// OpenAI's fields that dlm-server has no use for but that clients and gateways send with their default
/// values (the SGLang model gateway adds "echo": false to completions and "logprobs": false to chat):
/// accepted at that value, refused naming the field at any other.
[[nodiscard]] inline bool is_neutral_openai_field(std::string_view key, endpoint kind) {
    static constexpr std::string_view both[] = {"logprobs", "presence_penalty", "frequency_penalty", "logit_bias"};
    static constexpr std::string_view completions[] = {"echo", "best_of", "suffix"};
    static constexpr std::string_view chat[] = {"top_logprobs"};
    const auto in = [&](const auto& list) { return std::find(std::begin(list), std::end(list), key) != std::end(list); };
    return in(both) || (kind == endpoint::completions ? in(completions) : in(chat));
}

inline void check_neutral(const std::string& key, const nlohmann::json& v) {
    // logprobs 0 (completions: how many alternatives per token) and top_logprobs 0 (chat) ask for
    // none, as vLLM reads them.
    const bool none = (key == "logprobs" || key == "top_logprobs") && v.is_number_integer() && v.get<std::int64_t>() == 0;
    const bool neutral = v.is_null() || none || (v.is_boolean() && !v.get<bool>()) ||
                         ((key == "presence_penalty" || key == "frequency_penalty") && v.is_number() && v.get<double>() == 0) ||
                         (key == "best_of" && v.is_number_integer() && v.get<std::int64_t>() == 1) ||
                         (key == "logit_bias" && v.is_object() && v.empty()) || (key == "suffix" && v.is_string() && v.get_ref<const std::string&>().empty());
    if (!neutral) refuse(key, "dlm-server does not support it; only its neutral value is accepted (null, false, 0, 1 for best_of, {} for logit_bias)");
}

}  // namespace detail

namespace detail {

/// The sampler's fields (temperature, top_p, top_k, seed): false when `key` is none of them.
inline bool read_sampling_field(const std::string& key, const nlohmann::json& v, completion_request& r) {
    if (key != "temperature" && key != "top_p" && key != "top_k" && key != "seed") return false;
    if (v.is_null()) return true;
    if (key == "temperature" || key == "top_p") {
        const bool top_p = key == "top_p";
        const double x = number_in(key, v, 0, top_p ? 1 : 2, top_p);
        if (!float_keeps_range(x, 0, top_p ? 1 : 2, top_p, false))  // top_p 1e-50 is 0 as the sampler's float
            refuse(key, "is " + io::detail::json_quote(v) + ", which the sampler's float holds as " + std::to_string(static_cast<float>(x)) +
                            ", outside its range (use a value a float can tell from its bound)");
        (top_p ? r.top_p : r.temperature) = x;
    } else if (key == "top_k") {  // -1 is vLLM's "no top-k", as 0 is dlm's
        r.top_k = static_cast<index_t>(std::max<std::int64_t>(0, integer_in(key, v, -1, std::numeric_limits<index_t>::max())));
    } else if (v.is_number_unsigned()) {
        r.seed = v.get<std::uint64_t>();
    } else {  // vLLM takes any 64-bit signed seed
        r.seed = static_cast<std::uint64_t>(integer_in(key, v, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
    }
    return true;
}

/// dlm's own fields (threshold, editing_threshold, steps, block_length, stream_canvas): false when `key`
/// is none of them.
inline bool read_dlm_field(const std::string& key, const nlohmann::json& v, completion_request& r, const request_rules& rules) {
    if (key == "stream_canvas") {
        r.stream_canvas = boolean(key, v);
    } else if (key == "threshold") {
        r.threshold = number_in(key, v, 0, 1, true);
    } else if (key == "editing_threshold") {
        r.editing_threshold = number_in(key, v, 0, 1, false);
    } else if (key == "steps") {
        r.steps = static_cast<index_t>(integer_in(key, v, 1, 1 << 24));
    } else if (key == "block_length") {
        r.block_length = static_cast<index_t>(integer_in(key, v, 1, rules.max_max_tokens));
    } else {
        return false;
    }
    return true;
}

/// The slots a request's canvas is a whole number of: its block length (or the server's) where the
/// preset has blocks, else 1.
[[nodiscard]] inline index_t canvas_block(const completion_request& r, const request_rules& rules) {
    const index_t block = r.block_length.value_or(rules.block_length);
    return rules.has_blocks && block > 0 ? block : 1;
}

/// The canvas: max_tokens rounded up to whole blocks (the answer is cut at max_tokens), within the
/// model's context.
inline void size_canvas(completion_request& r, index_t max_tokens, const request_rules& rules) {
    r.max_tokens = max_tokens;
    const index_t block = canvas_block(r, rules);
    const std::int64_t slots = (std::int64_t{r.max_tokens} + block - 1) / block * block;  // in 64 bits: no wrap
    const std::string max_tokens_field = r.max_tokens_field.empty() ? "max_tokens" : r.max_tokens_field;
    if (slots > rules.max_max_tokens)
        refuse(r.block_length ? "block_length" : max_tokens_field, max_tokens_field + " " + std::to_string(r.max_tokens) + " rounded up to whole blocks of " +
                                                                   std::to_string(block) + " is " + std::to_string(slots) +
                                                                   " slots, more than the " + std::to_string(rules.max_max_tokens) +
                                                                   " the server takes (the model's context, at most " + std::to_string(max_slots) + ")");
    r.gen_length = static_cast<index_t>(slots);
}

/// Reads `stream`, `stream_options` (noting in `has_stream_options` that it was given) and, on chat,
/// `chat_template_kwargs` into r; false for any other key. null is an absent field.
inline bool read_object_field(const std::string& key, const nlohmann::json& v, endpoint kind, completion_request& r, bool& has_stream_options) {
    if (key == "stream") {
        r.stream = !v.is_null() && boolean(key, v);
    } else if (key == "stream_options") {
        if (v.is_null()) return true;
        if (!v.is_object()) refuse(key, "must be an object {\"include_usage\": bool}");
        has_stream_options = true;
        for (const auto& [k, x] : v.items()) {
            if (k != "include_usage") refuse("stream_options." + k, "unknown field");
            r.include_usage = boolean("stream_options.include_usage", x);
        }
    } else if (key == "chat_template_kwargs" && kind == endpoint::chat) {
        if (v.is_null()) return true;
        if (!v.is_object()) refuse(key, "must be an object {\"enable_thinking\": bool}");
        for (const auto& [k, x] : v.items()) {
            if (k != "enable_thinking") refuse(key + "." + k, "unknown field (dlm's chat templates read enable_thinking only)");
            r.thinking = boolean(key + ".enable_thinking", x) ? io::chat_thinking::on : io::chat_thinking::off;
        }
    } else {
        return false;
    }
    return true;
}

}  // namespace detail

/// Parses and checks a request body for `kind`. Throws request_error naming the field: 400 for
/// malformed JSON, an unknown field, a value of the wrong type or out of range, an option the
/// preset does not have; 404 (code "model_not_found") for another model than rules.model.
[[nodiscard]] inline completion_request parse_request(std::string_view body, endpoint kind, const request_rules& rules) {
    using namespace detail;
    nlohmann::json j;
    try {
        j = io::detail::parse_json_strict(body, "request body", "the request body");
    } catch (const error& e) {
        refuse("", std::string(e.what()).substr(std::string("request body: ").size()));
    }
    if (!j.is_object()) refuse("", "the request body must be a JSON object, got " + io::detail::json_kind(j));

    completion_request r;
    r.kind = kind;
    bool has_input = false, has_stream_options = false;
    // max_completion_tokens (chat) wins over max_tokens when both are given, as in vLLM.
    std::optional<index_t> max_tokens, max_completion_tokens;
    for (const auto& [key, v] : j.items()) {
        if (key == "model") {
            if (v.is_null()) continue;  // null: absent, as in vLLM
            const std::string m = text("model", v);
            if (m != rules.model)
                throw request_error("model", "this server serves '" + rules.model + "' only, not '" + m.substr(0, 80) + "'", 404,
                                    "invalid_request_error", "model_not_found");
        } else if (key == "prompt" && kind == endpoint::completions) {
            prompt_of(v, rules, r);
            has_input = true;
        } else if (key == "messages" && kind == endpoint::chat) {
            r.messages = messages_of(v, rules);
            has_input = true;
        } else if (key == "max_tokens" || (key == "max_completion_tokens" && kind == endpoint::chat)) {
            if (!v.is_null()) (key == "max_tokens" ? max_tokens : max_completion_tokens) = static_cast<index_t>(integer_in(key, v, 1, rules.max_max_tokens));
        } else if (read_sampling_field(key, v, r) || read_dlm_field(key, v, r, rules)) {
            // read into r
        } else if (key == "stop") {
            r.stop = stop_of(v, rules);
        } else if (read_object_field(key, v, kind, r, has_stream_options)) {
            // stream, stream_options, chat_template_kwargs: read into r
        } else if (key == "n") {
            if (!v.is_null() && integer_in(key, v, 1, 1) != 1) refuse(key, "must be 1");
        } else if (key == "user") {
            if (!v.is_null()) (void)text(key, v);
        } else if (is_neutral_openai_field(key, kind)) {
            check_neutral(key, v);
        } else {
            refuse(key, "unknown field (dlm-server reads model, " + std::string(kind == endpoint::chat ? "messages" : "prompt") +
                            ", max_tokens, " + std::string(kind == endpoint::chat ? "max_completion_tokens, " : "") + "temperature, top_p, top_k, seed, stop, stream, stream_options, n, user, and dlm's "
                            "threshold, editing_threshold, steps, block_length, stream_canvas" +
                            (kind == endpoint::chat ? std::string(", chat_template_kwargs") : std::string()) + ")");
        }
    }
    if (!has_input) refuse(kind == endpoint::chat ? "messages" : "prompt", "is required");
    if (r.stream_canvas && !r.stream) refuse("stream_canvas", "needs \"stream\": true");
    if (has_stream_options && !r.stream) refuse("stream_options", "applies to a streamed answer only: set \"stream\": true, or leave it out");

    r.max_tokens_field = max_completion_tokens ? "max_completion_tokens" : max_tokens ? "max_tokens" : "";
    size_canvas(r, max_completion_tokens.value_or(max_tokens.value_or(rules.default_max_tokens)), rules);
    if (rules.check_options) {
        try {
            rules.check_options(r);
        } catch (const request_error&) {
            throw;
        } catch (const invalid_parameter& e) {
            refuse(field_of(e.parameter(), kind), e.rule());
        }
    }
    return r;
}

}  // namespace dlm::server
