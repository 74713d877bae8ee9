// Helpers shared by the tokenizer tests: the JSON fixtures written by tools/make_*tokenizer_fixtures.py.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlm/core/config.hpp"
#include "dlm/io/chat_template.hpp"

namespace dlm_test {

inline nlohmann::json read_json(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p);
    return nlohmann::json::parse(in);
}

/// One JSON value per non-empty line.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << p);
    std::vector<nlohmann::json> v;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) v.push_back(nlohmann::json::parse(line));
    return v;
}

/// The bytes of a hex string ("c3a9" -> "\xc3\xa9"): the fixtures' invalid UTF-8 inputs.
inline std::string from_hex(const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

/// "1,2,3": ids for a failure message.
inline std::string show(const std::vector<dlm::token_id>& ids) {
    std::ostringstream s;
    for (std::size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
    return s.str();
}

/// The messages of a fixture's conversation ({"messages": [{"role", "content"}, ...]}).
inline std::vector<dlm::io::chat_message> chat_messages(const nlohmann::json& conversation) {
    std::vector<dlm::io::chat_message> out;
    for (const nlohmann::json& m : conversation["messages"]) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    return out;
}

}  // namespace dlm_test
