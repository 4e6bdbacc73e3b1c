// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/signals.hpp
/// SIGINT, SIGTERM and SIGHUP stop a search cleanly after the current
/// evaluation; outside a search they end the program, leaving no lock file.

#include <bosch/callbacks.hpp>
#include <bosch/options.hpp>

namespace bosch::cli {

/// Makes SIGINT, SIGTERM and SIGHUP end the program after removing the
/// registered files (io::register_file: the lock files), so that an
/// interrupt leaves nothing behind. run_command installs it for every
/// command; an ignored signal (nohup) stays ignored.
void install_exit_handlers();

/// Installs SIGINT, SIGTERM and SIGHUP handlers for its lifetime: the first
/// signal sets a flag (the search stops after the current evaluation); a
/// second one ends the program at once, after removing the registered files
/// (lock files).
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  /// The signal received (SIGINT, SIGTERM or SIGHUP), 0 when none.
  static int received() noexcept;
  /// 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP, 0 when none was received.
  static int exit_code() noexcept;
  /// "SIGINT", "SIGTERM" or "SIGHUP": the signal received.
  static const char* name() noexcept;
  /// Forget a received signal (repeated runs).
  static void reset() noexcept;
};

/// A select() callback that asks the search to stop once a signal arrived.
struct StopOnSignal {
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r);
};

}  // namespace bosch::cli
