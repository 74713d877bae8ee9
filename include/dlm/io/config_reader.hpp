// dlm/io/config_reader.hpp — typed access to the keys of a JSON config object (config.json,
// generation_config.json, tokenizer_config.json); every error names the file and the key.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "json_util.hpp"

namespace dlm::io {

namespace detail {

/// Typed access to a config object; every error names the source file and the key.
class config_reader {
public:
    config_reader(const nlohmann::json& j, const std::string& source) : j_(j), source_(source) {}

    [[noreturn]] void fail(const std::string& key, const std::string& why) const {
        throw file_error(source_, "key '" + key + "': " + why);
    }
    [[nodiscard]] const std::string& source() const noexcept { return source_; }
    [[nodiscard]] const nlohmann::json& object() const noexcept { return j_; }
    /// Present and not null.
    [[nodiscard]] bool has(const char* key) const {
        const auto it = j_.find(key);
        return it != j_.end() && !it->is_null();
    }
    [[nodiscard]] const nlohmann::json& required(const char* key) const {
        if (!j_.contains(key)) fail(key, "missing");
        const auto& v = j_.at(key);
        if (v.is_null()) fail(key, "is null");
        return v;
    }
    [[nodiscard]] index_t integer(const char* key) const { return to_index(key, required(key)); }
    [[nodiscard]] index_t integer_or(const char* key, index_t fallback) const {
        return has(key) ? integer(key) : fallback;
    }
    [[nodiscard]] double number_or(const char* key, double fallback) const {
        if (!has(key)) return fallback;
        const auto& v = j_.at(key);
        if (!v.is_number()) fail(key, "expected a number, found " + json_kind(v) + " " + json_quote(v));
        const double d = v.get<double>();
        if (!std::isfinite(d) || d <= 0) fail(key, json_quote(v) + " must be a positive finite number");
        return d;
    }
    [[nodiscard]] bool boolean_or(const char* key, bool fallback) const {
        if (!has(key)) return fallback;
        const auto& v = j_.at(key);
        if (!v.is_boolean()) fail(key, "expected true or false, found " + json_kind(v) + " " + json_quote(v));
        return v.get<bool>();
    }
    [[nodiscard]] std::optional<std::string> string_opt(const char* key) const {
        if (!has(key)) return std::nullopt;
        const auto& v = j_.at(key);
        if (!v.is_string()) fail(key, "expected a string, found " + json_kind(v) + " " + json_quote(v));
        return v.get<std::string>();
    }
    /// A token id or a list of them (null or absent: none).
    [[nodiscard]] std::vector<token_id> token_list(const char* key) const {
        std::vector<token_id> ids;
        if (!has(key)) return ids;
        const auto& v = j_.at(key);
        if (v.is_array()) {
            for (const auto& e : v) ids.push_back(to_index(key, e));
        } else {
            ids.push_back(to_index(key, v));
        }
        return ids;
    }
    /// Exactly one token id.
    [[nodiscard]] token_id single_token(const char* key) const { return to_index(key, required(key)); }
    /// If `key` is present, its value must be `wanted`; else fail saying why dlm cannot run it.
    void require(const char* key, const nlohmann::json& wanted, const char* why) const {
        if (has(key) && j_.at(key) != wanted)
            fail(key, json_quote(j_.at(key)) + " is not supported (dlm needs " + json_quote(wanted) + ": " + why + ")");
    }

private:
    [[nodiscard]] index_t to_index(const char* key, const nlohmann::json& v) const {
        const auto i = json_int64(v);
        if (!i) fail(key, "expected an integer, found " + json_kind(v) + " " + json_quote(v));
        if (*i < std::numeric_limits<index_t>::min() || *i > std::numeric_limits<index_t>::max())
            fail(key, std::to_string(*i) + " does not fit in 32 bits");
        return static_cast<index_t>(*i);
    }

    const nlohmann::json& j_;
    const std::string& source_;
};

}  // namespace detail

}  // namespace dlm::io
