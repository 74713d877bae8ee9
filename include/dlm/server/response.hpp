// dlm/server/response.hpp — the bodies dlm-server sends, in OpenAI's formats: the completion and
// chat completion objects, their streamed chunks as server-sent events ending with `data: [DONE]`,
// the model list, and the error object {"error": {"message", "type", "param", "code"}}.
//
// Every body goes through dump(), which writes invalid UTF-8 (a model may decode a lone byte) as
// U+FFFD instead of throwing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/server/request.hpp>

namespace dlm::server {

/// JSON text of `j`; invalid UTF-8 in strings becomes U+FFFD.
[[nodiscard]] inline std::string dump(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// One server-sent event carrying `j`.
[[nodiscard]] inline std::string sse_event(const nlohmann::json& j) { return "data: " + dump(j) + "\n\n"; }
/// The event that ends an OpenAI stream.
[[nodiscard]] inline std::string sse_done() { return "data: [DONE]\n\n"; }

/// {"error": {...}} for a refused request.
[[nodiscard]] inline nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                                               const std::string& code = {}) {
    return {{"error",
             {{"message", message},
              {"type", type},
              {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
              {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}}}};
}
[[nodiscard]] inline nlohmann::json error_body(const request_error& e) {
    return error_body(e.parameter().empty() ? e.rule() : e.what(), e.type(), e.parameter(), e.code());
}

/// What identifies one response's objects: its id, creation time and model.
struct response_head {
    std::string id;  ///< "cmpl-..." or "chatcmpl-..."
    std::int64_t created = 0;
    std::string model;
    endpoint kind = endpoint::completions;
};

struct usage {
    std::int64_t prompt_tokens = 0, completion_tokens = 0;
};

[[nodiscard]] inline nlohmann::json usage_json(const usage& u) {
    return {{"prompt_tokens", u.prompt_tokens}, {"completion_tokens", u.completion_tokens},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace detail {

/// The fields every object of one response shares, around its `choices`.
[[nodiscard]] inline nlohmann::json envelope(const response_head& h, const char* chat_object, nlohmann::json choices) {
    return {{"id", h.id},
            {"object", h.kind == endpoint::chat ? chat_object : "text_completion"},
            {"created", h.created},
            {"model", h.model},
            {"choices", std::move(choices)}};
}

/// One choice: `part` under "message" or "delta" for chat, the text under "text" otherwise.
[[nodiscard]] inline nlohmann::json choice(const response_head& h, const char* chat_key, nlohmann::json part, const std::string& text,
                                           nlohmann::json finish_reason) {
    nlohmann::json c = {{"index", 0}, {"finish_reason", std::move(finish_reason)}, {"logprobs", nullptr}};
    if (h.kind == endpoint::chat) c[chat_key] = std::move(part);
    else c["text"] = text;
    return nlohmann::json::array({std::move(c)});
}

}  // namespace detail

/// The whole answer (stream: false): a text_completion or a chat.completion object.
[[nodiscard]] inline nlohmann::json completion_body(const response_head& h, const std::string& text, std::string_view finish_reason,
                                                    const usage& u) {
    nlohmann::json j = detail::envelope(
        h, "chat.completion", detail::choice(h, "message", {{"role", "assistant"}, {"content", text}}, text, finish_reason));
    j["usage"] = usage_json(u);
    return j;
}

/// One streamed chunk: `text` appended to the answer, and with `finish_reason` the last one. The
/// first chat chunk (`first`) carries the role.
[[nodiscard]] inline nlohmann::json chunk_body(const response_head& h, const std::string& text, const std::optional<std::string>& finish_reason,
                                               bool first = false) {
    nlohmann::json delta = nlohmann::json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !finish_reason) delta["content"] = text;
    return detail::envelope(h, "chat.completion.chunk",
                            detail::choice(h, "delta", std::move(delta), text, finish_reason ? nlohmann::json(*finish_reason) : nlohmann::json(nullptr)));
}

/// The last chunk of a stream with stream_options.include_usage: no choices, the token counts.
[[nodiscard]] inline nlohmann::json usage_chunk(const response_head& h, const usage& u) {
    nlohmann::json j = chunk_body(h, "", std::nullopt);
    j["choices"] = nlohmann::json::array();
    j["usage"] = usage_json(u);
    return j;
}

/// dlm's canvas extension (stream_canvas): the whole canvas after one forward, each slot's text or
/// null while masked. Its object is "dlm.canvas", so OpenAI clients that read choices skip it.
[[nodiscard]] inline nlohmann::json canvas_body(const response_head& h, std::int64_t forward, const std::vector<std::optional<std::string>>& slots) {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& t : slots) s.push_back(t ? nlohmann::json(*t) : nlohmann::json(nullptr));
    nlohmann::json j = detail::envelope(h, "", nlohmann::json::array());
    j["object"] = "dlm.canvas";
    j["forward"] = forward;
    j["canvas"] = std::move(s);
    return j;
}

/// GET /v1/models.
[[nodiscard]] inline nlohmann::json models_body(const std::string& model, std::int64_t created) {
    return {{"object", "list"},
            {"data", nlohmann::json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "dlm"}}})}};
}

}  // namespace dlm::server
