// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/signals.hpp
/// SIGINT and SIGTERM stop a search cleanly after the current evaluation.

#include <bosch/callbacks.hpp>
#include <bosch/options.hpp>

namespace bosch::cli {

/// Installs SIGINT and SIGTERM handlers for its lifetime: the first signal
/// sets a flag (the search stops after the current evaluation); a second one
/// of the same kind ends the program at once (default action).
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  /// The signal received (SIGINT or SIGTERM), 0 when none.
  static int received() noexcept;
  /// 130 for SIGINT, 143 for SIGTERM, 0 when none was received.
  static int exit_code() noexcept;
  /// Forget a received signal (repeated runs).
  static void reset() noexcept;
};

/// A select() callback that asks the search to stop once a signal arrived.
struct StopOnSignal {
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r);
};

}  // namespace bosch::cli
