// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/open_model.hpp
/// Opening a model and choosing its backend from RunSettings, said once for
/// every front end: ModelRun (the search, `bosch select` and `compare`, the
/// Python package) and the commands that run forward passes without a search
/// (`bosch evaluate`, `baseline`, `generate`, `logits`). The device check,
/// the thread cap and their messages live here, worded for the command line
/// and Python alike.
///
/// @code
/// bosch::RunSettings s;
/// s.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// bosch::check_device(s);                        // CUDA asked for in a build without it
/// bosch::model::Model m = bosch::open_model(s);  // summary and thread cap to `info`
/// const bosch::cpu::Backend cpu(m, bosch::cpu_options(s));
/// @endcode

#include <bosch/cpu/backend.hpp>
#include <bosch/model/model.hpp>
#include <bosch/run/settings.hpp>

#include <functional>
#include <string>

namespace bosch {

/// Receives the informational lines of a run ("model: ...\n"), each ending
/// in a newline. Empty: the lines are dropped.
using InfoSink = std::function<void(const std::string&)>;

/// The CPU threads a run uses for `requested` (0 = all stays 0): capped at
/// the hardware's thread count (more only oversubscribe: 80x slower at 10000).
int usable_threads(int requested);

/// "model: NAME (ARCH, LxHqxHkv heads, 135M parameters)\n".
std::string model_summary(const model::Model& m);

/// The CPU backend options of `s`: its threads (capped, usable_threads) and
/// fp32, the precision of held-out reports, rankings and the commands
/// without a search; a search's backend sets `precision = s.precision`.
cpu::Options cpu_options(const RunSettings& s);

/// Whether this build has the CUDA backend (nvcc was found, BOSCH_WITH_CUDA=ON).
bool have_cuda() noexcept;

/// Throws bosch::invalid_argument naming "device" when `s` asks for CUDA in a
/// build without the CUDA backend (saying how to get one).
void check_device(const RunSettings& s);

/// Loads the model of `s.model` and tells `info` model_summary() and, when
/// s.threads exceeds the hardware's threads, that it is capped. Throws
/// bosch::file_error / format_error for unreadable files and
/// bosch::invalid_argument for a model the library cannot run.
model::Model open_model(const RunSettings& s, const InfoSink& info = {});

}  // namespace bosch
