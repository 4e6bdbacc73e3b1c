// SPDX-License-Identifier: Apache-2.0
// bosch: the command-line program. `bosch <command> [options]`; each command
// has --help. See docs/cli.md.

#include "commands.hpp"
#include "errors.hpp"
#include "files.hpp"
#include "mpi_session.hpp"

#include <bosch/version.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string_view>

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

// The dispatch table, in the order `bosch --help` lists the commands.
constexpr Command commands[] = {
    {"inspect", "show a model's architecture, head layout, size and tokenizer", bosch::cli::run_inspect},
    {"select", "choose sliding-window heads with BOSCH and write the mask", bosch::cli::run_select},
    {"evaluate", "held-out scores of a mask on a model", bosch::cli::run_evaluate},
    {"convert", "convert a mask (JSON, TSV, grid) or export it for kvpress, HF, GGUF, layers", bosch::cli::run_convert},
    {"baseline", "a mask from a static head ranking or a layer heuristic", bosch::cli::run_baseline},
    {"compare", "compare BOSCH with the baselines over SWA ratios", bosch::cli::run_compare},
    {"paired", "mask A minus mask B on the same held-out samples, with intervals", bosch::cli::run_paired},
    {"generate", "greedily continue a prompt, with or without a head mask", bosch::cli::run_generate},
    {"logits", "print a model's logits for token ids (bit-exact text)", bosch::cli::run_logits},
};

void usage(std::ostream& out) {
  out << "Usage: bosch <command> [options]\n\n"
         "Training-free selection of sliding-window attention heads (BOSCH).\n\nCommands:\n";
  for (const auto& c : commands) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-10s %s\n", c.name, c.summary);
    out << line;
  }
  out << "\nRun 'bosch <command> --help' for a command's options.\n"
         "Other options: --help, --version.\n"
         "Exit status: 0 success, 1 runtime error, 2 usage error, 130/143 interrupted.\n";
}

}  // namespace

int main(int argc, char** argv) {
  bosch::cli::install_stdout();  // every write to stdout checked (files.hpp)
  bosch::cli::MpiSession mpi(argc, argv);  // MPI when launched by mpirun/srun (mpi_session.hpp)
  if (argc < 2) {
    usage(std::cerr);
    return bosch::cli::exit_usage;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    if (cmd == "help" && argc > 2) {
      for (const auto& c : commands)
        if (std::strcmp(c.name, argv[2]) == 0) {
          char help[] = "--help";
          char* args[] = {argv[2], help, nullptr};
          return c.run(2, args);
        }
    }
    usage(std::cout);
    return bosch::cli::exit_success;
  }
  if (cmd == "--version" || cmd == "-V") {
    std::cout << "bosch " << bosch::version_string << "\n";
    return bosch::cli::exit_success;
  }
  for (const auto& c : commands)
    if (cmd == c.name) return mpi.finish(mpi.runs(c.name) ? c.run(argc - 1, argv + 1) : bosch::cli::exit_success);
  std::cerr << "bosch: unknown command '" << cmd << "' (see 'bosch --help')\n";
  return bosch::cli::exit_usage;
}
