// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/errors.hpp
/// Exit codes and error reporting of every `bosch` subcommand.
///
/// Exit codes: 0 success; 1 runtime error (unreadable model, corrupt file,
/// mismatched mask, missing output directory, device failure); 2 usage error
/// (unknown or missing option, value outside its domain or beyond its limit,
/// unknown task or variant); 130 / 143 interrupted by SIGINT / SIGTERM (after
/// writing the checkpoint). Every error is one line on stderr:
/// "bosch <cmd>: <message>".

#include <bosch/error.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bosch::cli {

inline constexpr int exit_success = 0;
inline constexpr int exit_failure = 1;   ///< runtime error
inline constexpr int exit_usage = 2;     ///< bad command line
inline constexpr int exit_sigint = 130;  ///< 128 + SIGINT
inline constexpr int exit_sigterm = 143; ///< 128 + SIGTERM

/// A bad command line (exit 2): message only, the command name is added.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A runtime failure (exit 1) that is not a bosch::error, or a
/// bosch::invalid_argument from the library that is not the user's option
/// value (e.g. a mask whose layout differs from the model's).
class runtime_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs `body` and turns exceptions into one line on stderr, "bosch <name>:
/// <message>", and an exit code: usage_error, boost::program_options errors
/// and bosch::invalid_argument -> 2; every other bosch::error,
/// runtime_failure, std::exception -> 1. Returns body's result otherwise.
int run_command(const char* name, const std::function<int()>& body);

/// "--probe-budget" for the field or key "probe_budget" ('_' -> '-').
std::string option_name(std::string_view field);

/// Runs `f` and re-raises a bosch::invalid_argument it throws with where =
/// `option` (the command-line option the value came from), keeping the message.
template <class F>
decltype(auto) for_option(const std::string& option, F&& f) {
  try {
    return f();
  } catch (const bosch::invalid_argument& e) {
    throw bosch::invalid_argument(e.message(), option);
  }
}

}  // namespace bosch::cli
