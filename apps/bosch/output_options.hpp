// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/output_options.hpp
/// How much a subcommand prints on stderr: --quiet / --verbose.

#include "command_line.hpp"

#include <ostream>

namespace bosch::cli {

/// How much goes to stderr.
enum class Verbosity { quiet, normal, verbose };

/// --quiet / --verbose.
struct OutputOptions {
  bool quiet = false;
  bool verbose = false;

  po::options_description describe();
  /// quiet beats verbose when both are given.
  Verbosity verbosity() const noexcept;
  /// stderr at normal and verbose level, a discarding stream when quiet.
  std::ostream& info() const;
  /// stderr at verbose level only.
  std::ostream& detail() const;
};

}  // namespace bosch::cli
