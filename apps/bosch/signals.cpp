// SPDX-License-Identifier: Apache-2.0
// SIGINT / SIGTERM / SIGHUP handling (see signals.hpp).

#include "signals.hpp"

#include "errors.hpp"

#include <bosch/io/file_lock.hpp>

#include <csignal>

namespace bosch::cli {

namespace {

constexpr int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

volatile std::sig_atomic_t g_signal = 0;

/// The end of the program by `sig`: the registered files (lock files) are
/// removed first, then the signal's default action ends the process with the
/// status the shell expects (128 + sig).
extern "C" void bosch_cli_die(int sig) {
  io::remove_registered_files();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

extern "C" void bosch_cli_on_signal(int sig) {
  if (g_signal != 0) {
    bosch_cli_die(sig);  // a second signal ends the program at once, leaving nothing behind
    return;
  }
  g_signal = sig;
}

using Handler = void (*)(int);
Handler g_saved[3] = {SIG_DFL, SIG_DFL, SIG_DFL};

}  // namespace

void install_exit_handlers() {
  for (int sig : stop_signals) {
    const Handler old = std::signal(sig, bosch_cli_die);
    if (old == SIG_IGN) std::signal(sig, SIG_IGN);  // nohup: an ignored signal stays ignored
  }
}

SignalGuard::SignalGuard() {
  g_signal = 0;
  for (int i = 0; i < 3; ++i) {
    g_saved[i] = std::signal(stop_signals[i], bosch_cli_on_signal);
    if (g_saved[i] == SIG_IGN) std::signal(stop_signals[i], SIG_IGN);
  }
}
SignalGuard::~SignalGuard() {
  for (int i = 0; i < 3; ++i) std::signal(stop_signals[i], g_saved[i] == SIG_ERR ? SIG_DFL : g_saved[i]);
}
int SignalGuard::received() noexcept { return g_signal; }
int SignalGuard::exit_code() noexcept {
  if (g_signal == SIGINT) return exit_sigint;
  if (g_signal == SIGTERM) return exit_sigterm;
  return g_signal ? 128 + g_signal : 0;
}
const char* SignalGuard::name() noexcept {
  switch (g_signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}
void SignalGuard::reset() noexcept { g_signal = 0; }

bool StopOnSignal::on_evaluation(const SearchView&, const EvaluationRecord&) { return g_signal != 0; }

}  // namespace bosch::cli
