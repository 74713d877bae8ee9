// dlm/core/error.hpp — the typed errors every part of dlm throws.
//
// Each error says *what* is wrong (the parameter, file or tensor) and *why* (the rule it breaks), so a
// user can fix the input without reading dlm's source.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "config.hpp"

namespace dlm {

/// Base of every error dlm throws on purpose.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A runtime parameter (decoding options, a policy's options, a prompt) breaks a rule.
/// Thrown before any model forward runs.
class invalid_parameter : public error {
public:
    invalid_parameter(std::string parameter, std::string rule)
        : error("invalid parameter '" + parameter + "': " + rule), parameter_(std::move(parameter)), rule_(std::move(rule)) {}
    /// The name of the offending parameter, e.g. "block_length".
    [[nodiscard]] const std::string& parameter() const noexcept { return parameter_; }
    /// The rule it breaks, e.g. "must divide gen_length (20), got 8".
    [[nodiscard]] const std::string& rule() const noexcept { return rule_; }

private:
    std::string parameter_, rule_;
};

/// A file could not be read, or its content is malformed.
class file_error : public error {
public:
    file_error(std::string path, const std::string& why)
        : error(path + ": " + why), path_(std::move(path)) {}
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

/// A tensor in a checkpoint is missing, unexpected, or has the wrong dtype, shape or extent.
class tensor_error : public file_error {
public:
    tensor_error(std::string path, std::string tensor, const std::string& why)
        : file_error(path, "tensor '" + tensor + "': " + why), tensor_(std::move(tensor)) {}
    [[nodiscard]] const std::string& tensor() const noexcept { return tensor_; }

private:
    std::string tensor_;
};

/// The model produced a non-finite logit; says at which forward and for which canvas row.
class numeric_error : public error {
public:
    numeric_error(index_t sequence, index_t forward, index_t row, const std::string& why)
        : error("sequence " + std::to_string(sequence) + ", forward " + std::to_string(forward) +
                ", row " + std::to_string(row) + ": " + why),
          sequence_(sequence), forward_(forward), row_(row) {}
    [[nodiscard]] index_t sequence() const noexcept { return sequence_; }
    [[nodiscard]] index_t forward() const noexcept { return forward_; }
    [[nodiscard]] index_t row() const noexcept { return row_; }

private:
    index_t sequence_, forward_, row_;
};

/// A policy or model broke the decoder's contract (a bug in a policy, not bad user input).
class contract_error : public error {
public:
    using error::error;
};

}  // namespace dlm
