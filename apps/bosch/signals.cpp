// SPDX-License-Identifier: Apache-2.0
// SIGINT / SIGTERM handling (see signals.hpp).

#include "signals.hpp"

#include "errors.hpp"

#include <csignal>

namespace bosch::cli {

namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void bosch_cli_on_signal(int sig) {
  g_signal = sig;
  std::signal(sig, SIG_DFL);  // a second signal of the same kind ends the program
}
struct SavedHandlers {
  void (*sigint)(int) = SIG_DFL;
  void (*sigterm)(int) = SIG_DFL;
};
SavedHandlers g_saved;
}  // namespace

SignalGuard::SignalGuard() {
  g_signal = 0;
  g_saved.sigint = std::signal(SIGINT, bosch_cli_on_signal);
  g_saved.sigterm = std::signal(SIGTERM, bosch_cli_on_signal);
}
SignalGuard::~SignalGuard() {
  std::signal(SIGINT, g_saved.sigint == SIG_ERR ? SIG_DFL : g_saved.sigint);
  std::signal(SIGTERM, g_saved.sigterm == SIG_ERR ? SIG_DFL : g_saved.sigterm);
}
int SignalGuard::received() noexcept { return g_signal; }
int SignalGuard::exit_code() noexcept {
  if (g_signal == SIGINT) return exit_sigint;
  if (g_signal == SIGTERM) return exit_sigterm;
  return g_signal ? 128 + g_signal : 0;
}
void SignalGuard::reset() noexcept { g_signal = 0; }

bool StopOnSignal::on_evaluation(const SearchView&, const EvaluationRecord&) { return g_signal != 0; }

}  // namespace bosch::cli
