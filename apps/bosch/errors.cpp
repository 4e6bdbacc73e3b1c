// SPDX-License-Identifier: Apache-2.0
// Exit codes and error reporting (see errors.hpp).

#include "errors.hpp"
#include "files.hpp"
#include "signals.hpp"

#include <boost/program_options/errors.hpp>

#include <iostream>
#include <new>

namespace bosch::cli {

int run_command(const char* name, const std::function<int()>& body) {
  auto line = [name](const std::string& msg) {
    std::cerr << "bosch " << name << ": " << msg << "\n";
    std::cerr.flush();
  };
  try {
    install_exit_handlers();
    const int code = body();
    try {
      check_stdout();
    } catch (const bosch::error& e) {
      // The command's output is lost: never exit 0 (an interrupted run keeps its code).
      line(e.what());
      return code == exit_success ? exit_failure : code;
    }
    return code;
  } catch (const boost::program_options::error& e) {
    line(std::string(e.what()) + " (see 'bosch " + name + " --help')");
    return exit_usage;
  } catch (const usage_error& e) {
    line(e.what());
    return exit_usage;
  } catch (const bosch::invalid_argument& e) {
    line(e.what());
    return exit_usage;
  } catch (const bosch::error& e) {
    line(e.what());
    return exit_failure;
  } catch (const std::bad_alloc&) {
    line("out of memory");
    return exit_failure;
  } catch (const std::exception& e) {
    line(e.what());
    return exit_failure;
  }
}

std::string option_name(std::string_view field) {
  std::string s = "--";
  for (char c : field) s += c == '_' ? '-' : c;
  return s;
}

}  // namespace bosch::cli
