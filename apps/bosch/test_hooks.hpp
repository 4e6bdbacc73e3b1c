// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/test_hooks.hpp
/// Hooks that let tests/cli interrupt `bosch select` at a known point. They
/// exist only in the test build of the program (target bosch_cli_test,
/// test_hooks.cpp compiled with BOSCH_CLI_TEST_HOOKS, not installed); in the
/// shipped `bosch` every function here does nothing, so its command line has
/// no such options.
///
/// Test build options of `select` (hidden from --help):
///   --stop-after N            after N evaluations, raise SIGINT ...
///   --stop-signal int|term|wait  ... or SIGTERM, or wait (up to 120 s) for a
///                             signal sent from outside

#include "command_line.hpp"

#include <bosch/callbacks.hpp>
#include <bosch/options.hpp>

#include <string>
#include <vector>

namespace bosch::cli::test_hooks {

/// True in the test build.
bool enabled() noexcept;

/// Adds the hook options to `hidden` (nothing in the shipped build).
void add_options(po::options_description& hidden);

/// Checks the values given (usage_error).
void check();

/// A select() callback placed before StopOnSignal: at the N-th evaluation it
/// raises the signal or waits for one.
struct Callback {
  void on_evaluation(const SearchView& v, const EvaluationRecord& r);
};

/// `args` without the hook options (they are not repeated in the command
/// that resumes an interrupted run).
std::vector<std::string> strip(std::vector<std::string> args);

}  // namespace bosch::cli::test_hooks
