// dlm/io/chat_template.hpp — the chat templates of the instruct models dlm decodes, written out by
// hand (no Jinja engine), and the detection of which one a model folder uses.
//
//   llada   LLaDA-8B-Instruct's tokenizer_config.json template:
//             <|startoftext|><|start_header_id|>{role}<|end_header_id|>\n\n{content | trim}<|eot_id|>...
//           then <|start_header_id|>assistant<|end_header_id|>\n\n. The BOS opens the first message
//           only; `trim` strips what Python's str.strip() strips.
//   chatml  Dream-v0-Instruct-7B's (Qwen2-Instruct's) template: <|im_start|>{role}\n{content}<|im_end|>\n
//           per message, preceded by the default system message "You are a helpful assistant." when
//           the first message is not a system message; then <|im_start|>assistant\n.
//   gemma4  Gemma 4's template (google/gemma-4-31B-it's chat_template.jinja), which DiffusionGemma's
//           processor (Gemma4Processor) uses, in its text-only subset: <bos>; a system turn
//           <|turn>system\n{content | trim}<turn|>\n when the first message is a system or developer
//           message; then <|turn>{role}\n{content}<turn|>\n per message, "assistant" written "model",
//           a model message's content with <|channel>...<channel|> thinking cut out and trimmed (other roles' content
//           trimmed), and no new header for a model message right after another assistant message;
//           tool messages are left out (the template renders them only as responses to tool calls,
//           which dlm does not write). Then <|turn>model\n<|channel>thought\n<channel|>: the template's
//           generation prompt with thinking off, its default. With thinking on (the template's
//           enable_thinking; chat_thinking::on) the system turn is always written and opens with
//           <|think|>\n, and the generation prompt is <|turn>model\n alone: the model writes its
//           thought channel itself. (transformers refuses an empty conversation; dlm writes <bos>
//           and the generation prompt.)
//   none    a base model: the contents joined by a blank line, nothing added.
//
// add_generation_prompt = false leaves out the assistant header. `thinking` is the templates'
// enable_thinking: only gemma4 reads it (the others have no thinking mode, and a Jinja template
// ignores a variable it does not use). (LLaDA's own template writes it
// unconditionally; dlm honours the flag so that a conversation can end on an assistant turn.)
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "json_util.hpp"
#include "unicode.hpp"

namespace dlm::io {

enum class chat_format { none, llada, chatml, gemma4 };

/// A chat template's enable_thinking (Gemma 4's thinking mode; off is every template's default).
enum class chat_thinking { off, on };

struct chat_message {
    std::string role;  // "system", "user", "assistant", ...
    std::string content;
};

namespace detail {

/// Python's str.isspace(), which Jinja's `trim` filter strips.
[[nodiscard]] constexpr bool python_is_space(char32_t c) noexcept {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Jinja's `trim`: `s` without leading and trailing whitespace.
[[nodiscard]] inline std::string jinja_trim(std::string_view s) {
    const std::u32string c = decode_utf8(s);
    std::size_t b = 0, e = c.size();
    while (b < e && python_is_space(c[b])) ++b;
    while (e > b && python_is_space(c[e - 1])) --e;
    return encode_utf8(std::u32string_view(c).substr(b, e - b));
}

/// Gemma 4's strip_thinking macro: the pieces of `text` outside <|channel> ... <channel|> thinking,
/// joined and trimmed (a piece before a <channel|> is kept up to its first <|channel>).
[[nodiscard]] inline std::string gemma4_strip_thinking(std::string_view text) {
    static constexpr std::string_view open = "<|channel>", close = "<channel|>";
    std::string kept;
    for (std::size_t begin = 0;;) {
        const std::size_t end = text.find(close, begin);
        const std::string_view part = text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
        kept += part.substr(0, part.find(open));
        if (end == std::string_view::npos) break;
        begin = end + close.size();
    }
    return jinja_trim(kept);
}

/// The gemma4 format (see the header comment).
[[nodiscard]] inline std::string gemma4_chat(std::span<const chat_message> messages, bool add_generation_prompt, chat_thinking thinking) {
    std::string out = "<bos>";
    std::size_t first = 0;
    const bool think = thinking == chat_thinking::on;
    const bool system = !messages.empty() && (messages[0].role == "system" || messages[0].role == "developer");
    if (system || think) {
        out += std::string("<|turn>system\n") + (think ? "<|think|>\n" : "") + (system ? jinja_trim(messages[0].content) : "") + "<turn|>\n";
        first = system ? 1 : 0;
    }
    static const std::string model_role = "model";  // "assistant" is written "model"
    const chat_message* previous = nullptr;        // the last message that was not a tool message
    for (const chat_message& m : messages.subspan(first)) {
        if (m.role == "tool") continue;
        const std::string& role = m.role == "assistant" ? model_role : m.role;
        const bool continues = role == model_role && previous != nullptr && previous->role == "assistant";
        if (!continues) out += "<|turn>" + role + "\n";
        out += (role == model_role ? gemma4_strip_thinking(m.content) : jinja_trim(m.content)) + "<turn|>\n";
        previous = &m;
    }
    if (add_generation_prompt) out += think ? "<|turn>model\n" : "<|turn>model\n<|channel>thought\n<channel|>";
    return out;
}

}  // namespace detail

/// The prompt text for `messages` in the model's chat format.
[[nodiscard]] inline std::string apply_chat_template(chat_format format, std::span<const chat_message> messages,
                                                     bool add_generation_prompt = true, chat_thinking thinking = chat_thinking::off) {
    std::string out;
    switch (format) {
        case chat_format::llada:
            for (std::size_t i = 0; i < messages.size(); ++i) {
                if (i == 0) out += "<|startoftext|>";
                out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" +
                       detail::jinja_trim(messages[i].content) + "<|eot_id|>";
            }
            if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
            break;
        case chat_format::chatml:
            if (!messages.empty() && messages[0].role != "system")
                out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
            for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
            if (add_generation_prompt) out += "<|im_start|>assistant\n";
            break;
        case chat_format::gemma4:
            out = detail::gemma4_chat(messages, add_generation_prompt, thinking);
            break;
        case chat_format::none:
            for (std::size_t i = 0; i < messages.size(); ++i) out += (i ? "\n\n" : "") + messages[i].content;
            break;
    }
    return out;
}

/// Which format a Jinja chat template writes: gemma4 for <|turn> ... <turn|>, llada for the
/// <|start_header_id|> ... <|eot_id|> family, chatml for <|im_start|> ... <|im_end|>, none otherwise.
[[nodiscard]] inline chat_format chat_format_of_template(std::string_view jinja) noexcept {
    const auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
    if (has("<|turn>") && has("<turn|>")) return chat_format::gemma4;
    if (has("<|start_header_id|>") && has("<|eot_id|>")) return chat_format::llada;
    if (has("<|im_start|>") && has("<|im_end|>")) return chat_format::chatml;
    return chat_format::none;
}

/// The chat format of a model folder, from the chat_template of its tokenizer_config.json (or of
/// chat_template.jinja / chat_template.json beside it, where newer exports keep it). A folder without
/// a template (a base model) is chat_format::none. Throws dlm::file_error for a malformed file, or
/// for one of those files that is there but is not a readable regular file (detail::optional_file).
[[nodiscard]] inline chat_format detect_chat_format(const std::filesystem::path& model_dir) {
    const auto from_json = [&](const std::filesystem::path& p, const char* what) -> std::optional<chat_format> {
        if (!detail::optional_file(p)) return std::nullopt;
        const nlohmann::json j = detail::parse_json_strict(detail::read_text_file(p), p.string(), what);
        if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) return std::nullopt;
        const auto& t = j["chat_template"];
        if (t.is_string()) return chat_format_of_template(t.get<std::string>());
        if (t.is_array()) {  // [{"name": "default", "template": "..."}, ...]
            for (const auto& named : t)
                if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
                    named["template"].is_string())
                    return chat_format_of_template(named["template"].get<std::string>());
        }
        throw file_error(p.string(), "chat_template: expected a string or a list holding a \"default\" template");
    };
    if (const auto f = from_json(model_dir / "tokenizer_config.json", "tokenizer_config.json")) return *f;
    if (const auto jinja = model_dir / "chat_template.jinja"; detail::optional_file(jinja))
        return chat_format_of_template(detail::read_text_file(jinja));
    if (const auto f = from_json(model_dir / "chat_template.json", "chat_template.json")) return *f;
    std::error_code ec;
    if (!std::filesystem::is_directory(model_dir, ec)) throw file_error(model_dir.string(), "no such folder");
    return chat_format::none;
}

}  // namespace dlm::io
