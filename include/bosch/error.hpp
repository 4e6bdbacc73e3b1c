// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file error.hpp
/// The exception hierarchy. Every error the library raises derives from
/// bosch::error and says what went wrong and where (file, tensor, field,
/// option). Programs catch bosch::error, print what(), and exit non-zero.

#include <stdexcept>
#include <string>
#include <utility>

namespace bosch {

/// Base of all bosch exceptions. what() is one line: "<where>: <message>"
/// when a location is known, otherwise just the message.
class error : public std::runtime_error {
 public:
  /// @param message what went wrong, without trailing punctuation.
  /// @param where   where it went wrong: a file path, "file: tensor 'x'",
  ///                an option name; may be empty.
  explicit error(const std::string& message, std::string where = {})
      : std::runtime_error(where.empty() ? message : where + ": " + message),
        message_(message),
        where_(std::move(where)) {}

  /// The message without the location.
  const std::string& message() const noexcept { return message_; }
  /// The location (file, tensor, field, option); may be empty.
  const std::string& where() const noexcept { return where_; }

 private:
  std::string message_;
  std::string where_;
};

/// An argument or option value outside its domain (ratio outside (0, 1),
/// window <= 0, layout mismatch between a mask and a model, ...).
class invalid_argument : public error {
 public:
  using error::error;
};

/// A file that cannot be opened, read or written.
class file_error : public error {
 public:
  using error::error;
};

/// A file whose content is malformed, truncated, inconsistent or of an
/// unsupported kind (wrong magic, unknown tensor type or architecture,
/// tensor beyond end of file, shape not matching the configuration, ...).
class format_error : public error {
 public:
  using error::error;
};

/// A failure of an accelerator runtime (CUDA, cuBLAS), or no device found.
class device_error : public error {
 public:
  using error::error;
};

}  // namespace bosch
