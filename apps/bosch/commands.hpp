// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/commands.hpp
/// The subcommands of `bosch`. Each takes the arguments after "bosch"
/// (argv[0] = the command's name) and returns the exit status.

namespace bosch::cli {

int run_inspect(int argc, char** argv);   ///< cmd_inspect.cpp
int run_select(int argc, char** argv);    ///< cmd_select.cpp
int run_evaluate(int argc, char** argv);  ///< cmd_evaluate.cpp
int run_convert(int argc, char** argv);   ///< cmd_convert.cpp
int run_baseline(int argc, char** argv);  ///< cmd_baseline.cpp
int run_compare(int argc, char** argv);   ///< cmd_compare.cpp
int run_paired(int argc, char** argv);    ///< cmd_paired.cpp
int run_generate(int argc, char** argv);  ///< cmd_generate.cpp
int run_logits(int argc, char** argv);    ///< cmd_logits.cpp

}  // namespace bosch::cli
