// SPDX-License-Identifier: Apache-2.0
// select_heads: the one run function of a head selection (see bosch/run/selection.hpp).

#include <bosch/run/selection.hpp>

#include <bosch/bosch.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/search_files.hpp>

#include <cmath>
#include <exception>
#include <filesystem>
#include <sstream>

namespace bosch {

Result LocalExecutor::select(ModelRun& run, const Options& options, CallbackList& callbacks) {
  auto observers = callbacks.observers();
  auto voters = callbacks.voters();
  return bosch::select(run, options, observers, voters);
}

std::string identity_path(const std::string& checkpoint) { return checkpoint + ".run.json"; }

Result run_search(ModelRun& run, const Options& options, CallbackList& callbacks, SearchExecutor* executor) {
  LocalExecutor local;
  return (executor ? *executor : static_cast<SearchExecutor&>(local)).select(run, options, callbacks);
}

namespace {

/// Refuses a resume whose run identity differs from the saved one; warns when
/// none was saved.
void check_identity(const std::string& path, const nlohmann::json& identity, const InfoSink& info) {
  if (!std::filesystem::exists(path)) {
    if (info)
      info("bosch select: warning: " + path +
           " is missing; cannot check that the model and tasks match the checkpoint\n");
    return;
  }
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(io::read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw format_error(std::string("not valid JSON: ") + e.what(), path);
  }
  if (saved == identity) return;
  std::string diff;
  for (auto it = identity.begin(); it != identity.end(); ++it)
    if (!saved.contains(it.key()) || saved[it.key()] != it.value())
      diff += (diff.empty() ? "" : ", ") + it.key() + " " +
              (saved.contains(it.key()) ? saved[it.key()].dump() : "-") + " -> " + it.value().dump();
  throw invalid_argument("the checkpoint belongs to a run with other settings (" + diff + ")", "resume");
}

}  // namespace

Selection select_heads(ModelRun& run, const SelectionRequest& request, CallbackList& callbacks,
                       SearchExecutor* executor, const InfoSink& info) {
  LocalExecutor local;
  SearchExecutor& exec = executor ? *executor : static_cast<SearchExecutor&>(local);
  const HeadLayout layout = run.layout();
  Selection out;
  Options& o = out.options;
  o = request.options;
  validate(o);
  (void)checked_target_count(layout, o.target_ratio, "target_ratio");

  // ---- warm starts: the caller's masks, named masks, rankings, the neighbour -------------
  for (const auto& w : request.init) o.initial_masks.push_back(w.mask);
  nlohmann::json candidates = nlohmann::json::array();
  for (eval::Method m : request.candidates) {
    const eval::HeadScores& s = run.ranking(m, o.seed, info);
    o.initial_masks.push_back(eval::ranking_mask(s, o.target_ratio));
    candidates.push_back({{"name", std::string(eval::to_string(m))},
                          {"evaluations", s.evaluations},
                          {"forwards", s.forwards},
                          {"seconds", s.seconds}});
  }
  if (request.previous) o.initial_masks.push_back(*request.previous);

  // ---- the run's identity beside the checkpoint ------------------------------------------
  // A resumed run must score masks the same way (same model, windows and
  // tasks), which the checkpoint alone (search options only) cannot tell.
  // A run that fails before its first checkpoint leaves no identity behind
  // (removed unless a checkpoint exists by then).
  struct IdentityGuard {
    std::string identity, checkpoint;
    ~IdentityGuard() {
      std::error_code ec;
      if (!identity.empty() && !std::filesystem::exists(checkpoint, ec)) std::filesystem::remove(identity, ec);
    }
  } identity_guard;
  if (!request.checkpoint.empty() && exec.root()) {
    nlohmann::json identity = run.identity();
    identity.update(request.identity_extra);
    const std::string path = identity_path(request.checkpoint);
    if (request.resume) {
      check_identity(path, identity, info);
    } else {
      io::write_file_atomic(path, identity.dump(2) + "\n");
      identity_guard.identity = path;
      identity_guard.checkpoint = request.checkpoint;
    }
  }

  if (info) {
    std::ostringstream line;
    line << "search: " << to_string(o.variant) << " variant, ratio " << o.target_ratio << " -> "
         << target_count(layout, o.target_ratio) << " of " << layout.size() << " KV heads, window "
         << run.settings().window << ", sinks " << run.settings().sinks;
    if (!o.initial_masks.empty()) line << ", " << o.initial_masks.size() << " warm-start masks";
    if (request.resume && !request.checkpoint.empty()) line << ", resuming from " << request.checkpoint;
    info(line.str() + "\n");
  }

  // ---- the search -----------------------------------------------------------------------
  CallbackList all;
  io::SearchFiles files({.checkpoint = request.checkpoint,
                         .checkpoint_every = request.checkpoint_every,
                         .resume = request.resume,
                         .log = request.log,
                         .log_every = request.log_every});
  all.add(files);
  // The caller's callbacks, after the files (a stop they ask for is saved).
  auto obs = callbacks.observers();
  auto votes = callbacks.voters();
  all.add(obs);
  all.add(votes);

  const std::size_t layers_before = exec.layers_run(run);
  const std::size_t rows_before = exec.row_layers(run);
  try {
    out.result = exec.select(run, o, all);
  } catch (...) {
    // Save every finished evaluation, then report the search's own error.
    if (exec.root()) files.save_after_error(layout, o);
    throw;
  }
  // The search's cost as select() records it (Result::forwards: what the
  // evaluator computed, summed over MPI processes, plus what a resumed
  // checkpoint recorded), the figure search_metadata writes; the layers the
  // run's evaluator ran when it does not count them.
  const std::size_t layers_ran = exec.layers_run(run) - layers_before;
  const std::size_t rows_ran = exec.row_layers(run) - rows_before;
  out.forwards = std::isfinite(out.result.forwards) ? out.result.forwards
                                                    : static_cast<double>(layers_ran) / layout.num_layers;
  // In tokens: the mean tokens per layer application of what this run ran
  // (after a resume, of the part it ran) times all of its forwards.
  if (layers_ran > 0)
    out.forward_tokens = out.forwards * static_cast<double>(rows_ran) / static_cast<double>(layers_ran);

  // ---- what the mask file records ---------------------------------------------------------
  out.metadata = run.metadata(o, out.result);
  nlohmann::json init_files = nlohmann::json::array();
  for (const auto& w : request.init) init_files.push_back(w.name);
  nlohmann::json warm{{"init_files", init_files},
                      {"candidates", candidates},
                      {"previous_ratio", request.previous ? nlohmann::json(request.previous_ratio) : nlohmann::json()},
                      {"initial_masks", o.initial_masks.size()}};
  warm.update(eval::warm_start_summary(out.result));
  out.metadata["warm_start"] = std::move(warm);
  out.metadata["forwards"] = out.forwards;
  out.metadata["forward_tokens"] =
      std::isfinite(out.forward_tokens) ? nlohmann::json(std::llround(out.forward_tokens)) : nlohmann::json();
  return out;
}

}  // namespace bosch
