// dlm/io/chat_template.hpp — the chat templates of the instruct models dlm decodes, written out by
// hand (no Jinja engine), and the detection of which one a model folder uses.
//
//   llada   LLaDA-8B-Instruct's tokenizer_config.json template:
//             <|startoftext|><|start_header_id|>{role}<|end_header_id|>\n\n{content | trim}<|eot_id|>...
//           then <|start_header_id|>assistant<|end_header_id|>\n\n. The BOS opens the first message
//           only; `trim` strips what Python's str.strip() strips.
//   chatml  Qwen2-Instruct's template: <|im_start|>{role}\n{content}<|im_end|>\n per message, whatever
//           its role, preceded by the default system message "You are a helpful assistant." when the
//           first message is not a system message; then <|im_start|>assistant\n.
//   qwen2_5 Qwen2.5's template with the same default system message, as Fast-dLLM v2 ships it
//           (Efficient-Large-Model/Fast_dLLM_v2_7B's chat_template.jinja): system, user and assistant
//           messages as chatml writes them; a run of tool messages is one user turn of
//           <tool_response>\n{content}\n</tool_response> blocks; other roles (developer) are left
//           out, as the template leaves them out.
//   chatml_bare  ChatML with no system message of its own: <|im_start|>{role}\n{content}<|im_end|>\n
//           per message, then <|im_start|>assistant\n.
//   qwen3   Qwen3's template, which SDAR's chat models ship (training/model/SDAR-*-Chat/chat_template.jinja
//           of JetAstra/SDAR): system, user and tool messages as qwen2_5 writes them, no default
//           system message; an assistant message's <think>...</think> reasoning is split off its
//           content, and written back as <think>\n{reasoning}\n</think>\n\n only after the last
//           user message (there, a final assistant message gets it even when empty); then
//           <|im_start|>assistant\n, followed by <think>\n\n</think>\n\n when thinking is
//           explicitly off (chat_thinking::off; the template's default and chat_thinking::on add
//           nothing). A developer message, which the template does not know, is left out.
//   gemma4  Gemma 4's template (google/gemma-4-31B-it's chat_template.jinja), which DiffusionGemma's
//           processor (Gemma4Processor) uses, in its text-only subset: <bos>; a system turn
//           <|turn>system\n{content | trim}<turn|>\n when the first message is a system or developer
//           message; then <|turn>{role}\n{content}<turn|>\n per message, "assistant" written "model",
//           a model message's content with <|channel>...<channel|> thinking cut out and trimmed (other
//           roles' content trimmed), and no new header for a model message right after another
//           assistant message; tool messages are left out (the template renders them only as
//           responses to tool calls, which dlm does not write). Then <|turn>model\n<|channel>thought\n
//           <channel|>: the template's generation prompt with thinking off, its default (an
//           enable_thinking of false is the same). With thinking on (chat_thinking::on) the system
//           turn is always written and opens with <|think|>\n, and the generation prompt is
//           <|turn>model\n alone: the model writes its thought channel itself. (transformers refuses
//           an empty conversation; dlm writes <bos> and the generation prompt.)
//   none    a base model: the contents joined by a blank line, nothing added.
//   unsupported  a template none of the above: dlm writes no prompt for it (apply_chat_template
//           throws invalid_parameter "chat") rather than a prompt the model was not trained on.
//
// add_generation_prompt = false leaves out the assistant header (LLaDA's own template writes it
// unconditionally; dlm honours the flag so that a conversation can end on an assistant turn).
// `thinking` is the templates' enable_thinking: not given (template_default), false (off) or true
// (on); gemma4 and qwen3 read it (the others have no thinking mode, and a Jinja template ignores a
// variable it does not use).
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

enum class chat_format { none, llada, chatml, qwen2_5, chatml_bare, qwen3, gemma4, unsupported };

/// The format's name, as the Python package's Model.chat_template reports it.
[[nodiscard]] constexpr std::string_view chat_format_name(chat_format f) noexcept {
    switch (f) {
        case chat_format::none: return "none";
        case chat_format::llada: return "llada";
        case chat_format::chatml: return "chatml";
        case chat_format::qwen2_5: return "qwen2_5";
        case chat_format::chatml_bare: return "chatml_bare";
        case chat_format::qwen3: return "qwen3";
        case chat_format::gemma4: return "gemma4";
        case chat_format::unsupported: return "unsupported";
    }
    return "unsupported";
}

/// A chat template's enable_thinking: not given (the template's own default), false or true. Gemma 4's
/// template reads an absent one as false; Qwen3's as true, and writes an empty thought for false.
enum class chat_thinking { template_default, off, on };

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

/// Python's str.lstrip / rstrip / strip of newlines only, as Qwen3's template calls them ('\n').
[[nodiscard]] inline std::string_view strip_newlines(std::string_view s, bool left, bool right) {
    while (left && !s.empty() && s.front() == '\n') s.remove_prefix(1);
    while (right && !s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
}

/// Qwen3's last_query_index: the last user message that is not a wrapped tool response, else the
/// last message.
[[nodiscard]] inline std::size_t qwen3_last_query(std::span<const chat_message> messages) {
    for (std::size_t i = messages.size(); i-- > 0;) {
        const std::string_view c = messages[i].content;
        if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return i;
    }
    return messages.empty() ? 0 : messages.size() - 1;
}

/// One assistant message in Qwen3's form: its <think> reasoning split off the content and written
/// back only after the last query (`keep_reasoning`), or when it is the final message.
[[nodiscard]] inline std::string qwen3_assistant(std::string_view text, bool keep_reasoning, bool last) {
    static constexpr std::string_view open = "<think>", close = "</think>";
    std::string_view content = text, reasoning;
    if (const std::size_t first_close = text.find(close); first_close != std::string_view::npos) {
        content = strip_newlines(text.substr(text.rfind(close) + close.size()), true, false);
        const std::string_view before = strip_newlines(text.substr(0, first_close), false, true);
        const std::size_t o = before.rfind(open);
        reasoning = strip_newlines(o == std::string_view::npos ? before : before.substr(o + open.size()), true, false);
    }
    std::string out = "<|im_start|>assistant\n";
    if (keep_reasoning && (last || !reasoning.empty()))
        out += "<think>\n" + std::string(strip_newlines(reasoning, true, true)) + "\n</think>\n\n" + std::string(strip_newlines(content, true, false));
    else
        out += content;
    return out + "<|im_end|>\n";
}

/// Message i, a tool message, in Qwen2.5's and Qwen3's form: a run of tool messages is one user turn
/// of <tool_response> blocks.
inline void chatml_tool_response(std::string& out, std::span<const chat_message> messages, std::size_t i) {
    const auto is_tool = [&](std::size_t j) { return j < messages.size() && messages[j].role == "tool"; };
    if (i == 0 || !is_tool(i - 1)) out += "<|im_start|>user";
    out += "\n<tool_response>\n" + messages[i].content + "\n</tool_response>";
    if (!is_tool(i + 1)) out += "<|im_end|>\n";
}

/// One ChatML turn.
[[nodiscard]] inline std::string chatml_turn(const chat_message& m) { return "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n"; }

/// The chatml, qwen2_5 and chatml_bare formats (see the header comment).
[[nodiscard]] inline std::string chatml_chat(chat_format format, std::span<const chat_message> messages, bool add_generation_prompt) {
    std::string out;
    if (format != chat_format::chatml_bare && !messages.empty() && messages[0].role != "system")
        out += "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n";
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (format != chat_format::qwen2_5 || role == "system" || role == "user" || role == "assistant") out += chatml_turn(messages[i]);
        else if (role == "tool") chatml_tool_response(out, messages, i);
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

/// The qwen3 format (see the header comment).
[[nodiscard]] inline std::string qwen3_chat(std::span<const chat_message> messages, bool add_generation_prompt, chat_thinking thinking) {
    std::string out;
    const bool system = !messages.empty() && messages[0].role == "system";
    if (system) out += chatml_turn(messages[0]);
    const std::size_t last_query = qwen3_last_query(messages);
    for (std::size_t i = system ? 1 : 0; i < messages.size(); ++i) {
        const chat_message& m = messages[i];
        if (m.role == "user" || m.role == "system") out += chatml_turn(m);
        else if (m.role == "assistant") out += qwen3_assistant(m.content, i > last_query, i + 1 == messages.size());
        else if (m.role == "tool") chatml_tool_response(out, messages, i);
    }
    if (add_generation_prompt) out += thinking == chat_thinking::off ? "<|im_start|>assistant\n<think>\n\n</think>\n\n" : "<|im_start|>assistant\n";
    return out;
}

/// Whether a ChatML template writes a system message of its own: text that goes on after
/// "<|im_start|>system" and its newline (Jinja's escape or the character), where a template that takes
/// it from the messages ends its string literal or opens a Jinja tag ({{ or {%).
[[nodiscard]] inline bool writes_default_system(std::string_view jinja) noexcept {
    static constexpr std::string_view head = "<|im_start|>system";
    for (std::size_t at = jinja.find(head); at != std::string_view::npos; at = jinja.find(head, at + 1)) {
        std::string_view rest = jinja.substr(at + head.size());
        if (rest.starts_with("\\n")) rest.remove_prefix(2);
        else if (rest.starts_with('\n')) rest.remove_prefix(1);
        else continue;
        if (!rest.empty() && rest.front() != '\'' && rest.front() != '"' && !rest.starts_with("{{") && !rest.starts_with("{%")) return true;
    }
    return false;
}

}  // namespace detail

/// Why dlm writes no prompt for a chat_format::unsupported template.
inline constexpr std::string_view unsupported_chat_template_rule =
    "the model's chat template is not one dlm writes (LLaDA's; Qwen2's and Qwen2.5's ChatML with \"You are a helpful "
    "assistant.\" as the default system message, as Dream and Fast-dLLM v2 use; plain ChatML; Qwen3's, as SDAR ships it; "
    "Gemma 4's): write the prompt in the template's form yourself and send it as a plain prompt";

/// The prompt text for `messages` in the model's chat format. Throws dlm::invalid_parameter "chat" for
/// chat_format::unsupported.
[[nodiscard]] inline std::string apply_chat_template(chat_format format, std::span<const chat_message> messages,
                                                     bool add_generation_prompt = true,
                                                     chat_thinking thinking = chat_thinking::template_default) {
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
        case chat_format::qwen2_5:
        case chat_format::chatml_bare:
            out = detail::chatml_chat(format, messages, add_generation_prompt);
            break;
        case chat_format::qwen3:
            out = detail::qwen3_chat(messages, add_generation_prompt, thinking);
            break;
        case chat_format::gemma4:
            out = detail::gemma4_chat(messages, add_generation_prompt, thinking);
            break;
        case chat_format::unsupported:
            throw invalid_parameter("chat", std::string(unsupported_chat_template_rule));
        case chat_format::none:
            for (std::size_t i = 0; i < messages.size(); ++i) out += (i ? "\n\n" : "") + messages[i].content;
            break;
    }
    return out;
}

/// Which format a Jinja chat template writes, by its markers: gemma4 for <|turn> ... <turn|>, llada for
/// the <|start_header_id|> ... <|eot_id|> family. For <|im_start|> ... <|im_end|>: where it writes "You
/// are a helpful assistant." as its default system message and has no thinking, qwen2_5 if it writes
/// <tool_response> turns (Fast-dLLM v2's), chatml if not (Qwen2-Instruct's); qwen3 where it writes no
/// system message of its own and has Qwen3's enable_thinking, last_query_index and empty thought
/// (SDAR's); chatml_bare where it writes no system message of its own, names no thinking, tool, BOS or
/// system text, and writes every message with plain ChatML's one turn expression. Any other template is unsupported (Qwen2.5-Instruct's "You are Qwen, ..."
/// default, QwQ's opened thought, a BOS in front, ...), so that dlm never writes a prompt in a form the
/// model was not trained on.
[[nodiscard]] inline chat_format chat_format_of_template(std::string_view jinja) noexcept {
    if (jinja.find_first_not_of(" \t\r\n") == std::string_view::npos) return chat_format::none;  // writes nothing
    const auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
    if (has("<|turn>") && has("<turn|>")) return chat_format::gemma4;
    if (has("<|start_header_id|>") && has("<|eot_id|>")) return chat_format::llada;
    if (!has("<|im_start|>") || !has("<|im_end|>")) return chat_format::unsupported;
    // Jinja's escapes or the characters themselves.
    const auto has_lines = [&](std::string_view escaped, std::string_view raw) { return has(escaped) || has(raw); };
    const bool helpful = has_lines("<|im_start|>system\\nYou are a helpful assistant.<|im_end|>",
                                   "<|im_start|>system\nYou are a helpful assistant.<|im_end|>");
    const bool own_system = detail::writes_default_system(jinja);
    if (helpful && !has("think")) return has("<tool_response>") ? chat_format::qwen2_5 : chat_format::chatml;
    if (own_system) return chat_format::unsupported;
    if (has("enable_thinking") && has("last_query_index") && has_lines("'<think>\\n\\n</think>\\n\\n'", "'<think>\n\n</think>\n\n'"))
        return chat_format::qwen3;
    for (const std::string_view other : {"think", "tool", "bos_token", "You are", "system_message", "default_system", "!= 'system'"})
        if (has(other)) return chat_format::unsupported;
    // Plain ChatML writes each message with the one turn expression (a raw-text template may skip some).
    const bool one_turn = has("'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>") ||
                          has("'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>");
    return one_turn ? chat_format::chatml_bare : chat_format::unsupported;
}

/// The chat format of a model folder, from its chat_template.jinja (which transformers 5 reads before
/// tokenizer_config.json), else the chat_template of its tokenizer_config.json, else chat_template.json. A folder without
/// a template (a base model) is chat_format::none; one with a template dlm does not write,
/// chat_format::unsupported. Throws dlm::file_error for a malformed file, or
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
    if (const auto jinja = model_dir / "chat_template.jinja"; detail::optional_file(jinja))  // transformers 5 prefers it
        return chat_format_of_template(detail::read_text_file(jinja));
    if (const auto f = from_json(model_dir / "tokenizer_config.json", "tokenizer_config.json")) return *f;
    if (const auto f = from_json(model_dir / "chat_template.json", "chat_template.json")) return *f;
    std::error_code ec;
    if (!std::filesystem::is_directory(model_dir, ec)) throw file_error(model_dir.string(), "no such folder");
    return chat_format::none;
}

}  // namespace dlm::io
