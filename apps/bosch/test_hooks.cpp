// SPDX-License-Identifier: Apache-2.0
// Test hooks of `bosch select` (see test_hooks.hpp). Compiled twice: with
// BOSCH_CLI_TEST_HOOKS into the test build, without (every function empty)
// into the shipped program.

#include "test_hooks.hpp"

#ifdef BOSCH_CLI_TEST_HOOKS
#include "signals.hpp"

#include <chrono>
#include <csignal>
#include <thread>
#endif

namespace bosch::cli::test_hooks {

#ifdef BOSCH_CLI_TEST_HOOKS

namespace {
std::size_t g_stop_after = 0;
std::string g_stop_signal = "int";
}  // namespace

bool enabled() noexcept { return true; }

void add_options(po::options_description& hidden) {
  hidden.add_options()("stop-after", po::value(&g_stop_after), "test hook: raise a signal after N evaluations")(
      "stop-signal", po::value(&g_stop_signal), "test hook: int | term | wait (for an outside signal)");
}

void check() {
  if (g_stop_signal != "int" && g_stop_signal != "term" && g_stop_signal != "wait")
    throw usage_error("--stop-signal: expected int, term or wait");
}

void Callback::on_evaluation(const SearchView& v, const EvaluationRecord&) {
  if (g_stop_after == 0 || v.evaluations != g_stop_after || SignalGuard::received() != 0) return;
  if (g_stop_signal == "wait") {
    for (int i = 0; i < 12000 && SignalGuard::received() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } else {
    std::raise(g_stop_signal == "term" ? SIGTERM : SIGINT);
  }
}

std::vector<std::string> strip(std::vector<std::string> args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--stop-after" || a == "--stop-signal") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--stop-after=", 0) == 0 || a.rfind("--stop-signal=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

#else

bool enabled() noexcept { return false; }
void add_options(po::options_description&) {}
void check() {}
void Callback::on_evaluation(const SearchView&, const EvaluationRecord&) {}
std::vector<std::string> strip(std::vector<std::string> args) { return args; }

#endif

}  // namespace bosch::cli::test_hooks
