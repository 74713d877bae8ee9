// The chat formats dlm writes by hand (dlm/io/chat_template.hpp) against the templates the published
// checkpoints ship, rendered by transformers (tools/make_chat_template_fixtures.py): Qwen3's as SDAR's
// chat models ship it, and Qwen2.5's as Fast-dLLM v2 ships it. Also: a
// template dlm does not write is detected as such and refused, never written in another form.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/io/chat_template.hpp>

#include "io_test_util.hpp"
#include "tokenizer_test_util.hpp"

namespace test_chat_templates {

using dlm::io::chat_format;
using dlm::io::chat_thinking;
using json = nlohmann::json;

namespace {

const std::filesystem::path data_dir = std::filesystem::path(DLM_TEST_DATA) / "chat_templates";

chat_thinking thinking_of(const json& conversation) {
    if (!conversation.contains("enable_thinking")) return chat_thinking::template_default;
    return conversation["enable_thinking"].get<bool>() ? chat_thinking::on : chat_thinking::off;
}

/// Renders every conversation of FORMAT.json in `format`; returns how many, and how many per thinking mode.
struct rendered {
    std::size_t all = 0, unset = 0, off = 0, on = 0;
};

rendered check_against_transformers(const std::string& name, chat_format format) {
    const json fixture = dlm_test::read_json(data_dir / (name + ".json"));
    rendered n;
    for (const json& c : fixture["conversations"]) {
        const chat_thinking t = thinking_of(c);
        const bool prompt = c["add_generation_prompt"].get<bool>();
        INFO(name << ": " << c["messages"].dump() << ", add_generation_prompt " << prompt << ", enable_thinking "
                  << (c.contains("enable_thinking") ? c["enable_thinking"].dump() : "not given"));
        CHECK(dlm::io::apply_chat_template(format, dlm_test::chat_messages(c), prompt, t) == c["text"].get<std::string>());
        ++n.all;
        (t == chat_thinking::template_default ? n.unset : t == chat_thinking::off ? n.off : n.on) += 1;
    }
    return n;
}

/// The template's lines that name its markers, joined as they stand in the file.
std::string lines_of(const std::string& name) {
    const json fixture = dlm_test::read_json(data_dir / (name + ".json"));
    std::string out;
    for (const json& line : fixture["lines"]) out += line.get<std::string>() + "\n";
    return out;
}

}  // namespace

TEST_CASE("chat templates: SDAR's (Qwen3's) template renders every conversation as transformers does, thinking unset, off and on") {
    const rendered n = check_against_transformers("qwen3", chat_format::qwen3);
    CHECK(n.all >= 50);
    CHECK(n.unset >= 10);
    CHECK(n.off >= 10);
    CHECK(n.on >= 10);
}

TEST_CASE("chat templates: Fast-dLLM v2's (Qwen2.5's) template renders every conversation as transformers does, tool and developer turns too") {
    CHECK(check_against_transformers("qwen2_5", chat_format::qwen2_5).all >= 20);
}

TEST_CASE("chat templates: the published templates' own lines are detected as their formats") {
    CHECK(dlm::io::chat_format_of_template(lines_of("qwen3")) == chat_format::qwen3);
    CHECK(dlm::io::chat_format_of_template(lines_of("qwen2_5")) == chat_format::qwen2_5);
    const auto without = [](std::string text, std::string_view what) {
        for (std::size_t at; (at = text.find(what)) != std::string::npos;) text.erase(at, what.size());
        return text;
    };
    // Qwen3's is told apart by its enable_thinking, not by its ChatML markers alone; a template that
    // names thinking in another way is none dlm writes.
    CHECK(dlm::io::chat_format_of_template(without(lines_of("qwen3"), "enable_thinking")) == chat_format::unsupported);
    // Qwen2.5's without its tool turns is Qwen2's; without its default system message it writes an
    // empty one of its own ("<|im_start|>system\n<|im_end|>"); with another default, unsupported.
    CHECK(dlm::io::chat_format_of_template(without(lines_of("qwen2_5"), "<tool_response>")) == chat_format::chatml);
    CHECK(dlm::io::chat_format_of_template(without(lines_of("qwen2_5"), "You are a helpful assistant.")) == chat_format::unsupported);
    std::string other = lines_of("qwen2_5");
    for (std::size_t at; (at = other.find("a helpful")) != std::string::npos;) other.replace(at, 9, "an unhelpful");
    CHECK(dlm::io::chat_format_of_template(other) == chat_format::unsupported);
}

TEST_CASE("chat templates: ChatML templates are told apart by what they write, and one dlm cannot tell is unsupported") {
    const auto format = [](std::string_view t) { return dlm::io::chat_format_of_template(t); };
    const std::string turns = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
                              "{%- endfor %}";
    const std::string prompt = "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    CHECK(format(turns + prompt) == chat_format::chatml_bare);
    // Turns written as raw text may leave messages out (a later system message, here): not plain ChatML.
    CHECK(format("{% for message in messages %}{% if message['role'] != 'system' %}<|im_start|>{{ message['role'] }}\n"
                 "{{ message['content'] }}<|im_end|>\n{% endif %}{% endfor %}" + prompt) == chat_format::unsupported);
    CHECK(format("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}" +
                 prompt) == chat_format::unsupported);
    // QwQ's opened thought, a BOS in front, a default system message in a literal of its own:
    // written by none of dlm's formats.
    CHECK(format(turns + "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}") ==
          chat_format::unsupported);
    CHECK(format("{{- bos_token }}" + turns + prompt) == chat_format::unsupported);
    CHECK(format("{{- '<|im_start|>system\\n' }}{{- 'You are a pirate.' }}{{- '<|im_end|>\\n' }}" + turns + prompt) ==
          chat_format::unsupported);

    // transformers 5 reads chat_template.jinja before tokenizer_config.json's chat_template; so does dlm.
    dlm_test::temp_dir dir;
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", "{{- '<role>HUMAN</role>' }}"}}.dump());
    CHECK(dlm::io::detect_chat_format(dir.path()) == chat_format::unsupported);
    dlm_test::write_text(dir / "chat_template.jinja", lines_of("qwen3"));
    CHECK(dlm::io::detect_chat_format(dir.path()) == chat_format::qwen3);
}

TEST_CASE("chat templates: a template dlm does not write is unsupported, and refused by name rather than written in another form") {
    // Qwen2.5's default system message is not Dream's: its template is not taken for ChatML.
    const std::string qwen25 =
        "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
        "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
        "{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    // Ling 2.0's (LLaDA2's kin): no marker dlm knows.
    const std::string ling = "{{- '<role>SYSTEM</role>' }}{{- 'detailed thinking off<|role_end|>' }}{%- for message in messages %}"
                             "{{- '<role>HUMAN</role>' + message.content + '<|role_end|>' }}{%- endfor %}{{- '<role>ASSISTANT</role>' }}";
    CHECK(dlm::io::chat_format_of_template(qwen25) == chat_format::unsupported);
    CHECK(dlm::io::chat_format_of_template(ling) == chat_format::unsupported);
    CHECK(dlm::io::chat_format_of_template("") == chat_format::none);  // an empty template writes nothing
    CHECK(dlm::io::chat_format_name(chat_format::unsupported) == "unsupported");

    dlm_test::temp_dir dir;
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", ling}}.dump());
    CHECK(dlm::io::detect_chat_format(dir.path()) == chat_format::unsupported);
    const std::vector<dlm::io::chat_message> hi{{"user", "Hi"}};
    dlm_test::expect_error<dlm::invalid_parameter>([&] { (void)dlm::io::apply_chat_template(chat_format::unsupported, hi); },
                                                   {"'chat'", "not one dlm writes", "Qwen3", "as a plain prompt"});
}

TEST_CASE("chat templates: Qwen3's thinking: unset and on add nothing, off writes the empty thought; the others ignore it") {
    const std::vector<dlm::io::chat_message> hi{{"user", "Hi"}};
    const std::string head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    CHECK(dlm::io::apply_chat_template(chat_format::qwen3, hi) == head);
    CHECK(dlm::io::apply_chat_template(chat_format::qwen3, hi, true, chat_thinking::on) == head);
    CHECK(dlm::io::apply_chat_template(chat_format::qwen3, hi, true, chat_thinking::off) == head + "<think>\n\n</think>\n\n");
    CHECK(dlm::io::apply_chat_template(chat_format::qwen3, {}) == "<|im_start|>assistant\n");  // transformers refuses one
    for (const chat_format f : {chat_format::llada, chat_format::chatml, chat_format::none})
        CHECK(dlm::io::apply_chat_template(f, hi, true, chat_thinking::off) == dlm::io::apply_chat_template(f, hi, true, chat_thinking::on));
}

}  // namespace test_chat_templates
