// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mpi/select.hpp
/// bosch::mpi::select: bosch::select run by every process of an MPI
/// communicator (SPMD), with a ParallelEvaluator and callbacks made safe for
/// several processes:
///
/// - a hook that returns void is an observer (progress lines, evaluation log,
///   checkpoint files): it runs on rank 0 only, so only rank 0 writes;
/// - a hook that returns a stop request (bool) runs on every process and the
///   requests are OR-ed over the processes (one MPI_Allreduce per call), so
///   every process stops after the same evaluation, e.g. when a signal reached
///   only some of them, and the collective calls stay matched;
/// - replay_log (resume) runs on rank 0 and the records are broadcast, so only
///   rank 0 reads the checkpoint (the other processes need not see its file
///   system); an error reading it is raised on every process.
///
/// @code
/// bosch::mpi::Environment env(argc, argv);
/// bosch::TransformerEvaluator evaluator(backend, calibration, eo);
/// bosch::mpi::ParallelEvaluator parallel(evaluator, env.world(), {bosch::mpi::Mode::samples});
/// bosch::Checkpoint ck("run.checkpoint", 1);       // written by rank 0 only
/// bosch::Result r = bosch::mpi::select(parallel, options, ck);  // same on every rank
/// @endcode

#include <bosch/callbacks.hpp>
#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/mpi/communicator.hpp>
#include <bosch/mpi/evaluator.hpp>
#include <bosch/options.hpp>
#include <bosch/search/select.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch::mpi {

namespace detail {

inline std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
inline double double_of(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

inline std::vector<std::uint64_t> sample_bits(const std::vector<double>& v) {
  std::vector<std::uint64_t> out;
  for (double x : v) out.push_back(bits_of(x));
  return out;
}

/// The records as JSON text, scores and times as exact bit patterns.
inline std::string encode_records(const std::vector<EvaluationRecord>& log) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& r : log) {
    std::string m(r.mask.size(), '0');
    for (std::size_t i = 0; i < r.mask.size(); ++i) m[i] = r.mask[i] ? '1' : '0';
    recs.push_back({{"index", r.index},
                    {"stage", to_string(r.stage)},
                    {"mask", m},
                    {"score", bits_of(r.score)},
                    {"seconds", bits_of(r.seconds)},
                    {"forwards", bits_of(r.forwards)},
                    {"eliminated", r.eliminated},
                    {"samples", r.samples},
                    {"sample_scores", sample_bits(r.sample_scores)},
                    {"score_sd", bits_of(r.score_sd)}});
  }
  return nlohmann::json{{"ok", true}, {"records", std::move(recs)}}.dump();
}

inline std::vector<EvaluationRecord> decode_records(const nlohmann::json& j, const HeadLayout& layout) {
  std::vector<EvaluationRecord> out;
  for (const auto& r : j.at("records")) {
    EvaluationRecord e;
    e.index = r.at("index").get<std::size_t>();
    e.stage = parse_stage(r.at("stage").get<std::string>());
    const std::string m = r.at("mask").get<std::string>();
    e.mask = HeadMask(layout);
    if (m.size() != e.mask.size()) throw error("replayed mask of the wrong size", "mpi::select");
    for (std::size_t i = 0; i < m.size(); ++i) e.mask.set_flat(i, m[i] == '1');
    e.score = double_of(r.at("score").get<std::uint64_t>());
    e.seconds = double_of(r.at("seconds").get<std::uint64_t>());
    e.forwards = double_of(r.at("forwards").get<std::uint64_t>());
    e.eliminated = r.at("eliminated").get<bool>();
    e.samples = r.at("samples").get<std::size_t>();
    for (const auto& b : r.at("sample_scores")) e.sample_scores.push_back(double_of(b.get<std::uint64_t>()));
    e.score_sd = double_of(r.at("score_sd").get<std::uint64_t>());
    out.push_back(std::move(e));
  }
  return out;
}

/// An exception as JSON text, to be raised again on the other processes with
/// the same type (so that every process ends with the same exit status).
inline std::string encode_error(std::exception_ptr p) {
  nlohmann::json j{{"ok", false}, {"kind", "other"}, {"message", "unknown error"}, {"where", ""}};
  try {
    std::rethrow_exception(p);
  } catch (const invalid_argument& e) {
    j.update({{"kind", "invalid_argument"}, {"message", e.message()}, {"where", e.where()}});
  } catch (const format_error& e) {
    j.update({{"kind", "format_error"}, {"message", e.message()}, {"where", e.where()}});
  } catch (const file_error& e) {
    j.update({{"kind", "file_error"}, {"message", e.message()}, {"where", e.where()}});
  } catch (const bosch::error& e) {
    j.update({{"kind", "error"}, {"message", e.message()}, {"where", e.where()}});
  } catch (const std::exception& e) {
    j["message"] = e.what();
  } catch (...) {
  }
  return j.dump();
}

[[noreturn]] inline void raise_error(const nlohmann::json& j) {
  const std::string kind = j.at("kind").get<std::string>(), message = j.at("message").get<std::string>(),
                    where = j.at("where").get<std::string>();
  if (kind == "invalid_argument") throw invalid_argument(message, where);
  if (kind == "format_error") throw format_error(message, where);
  if (kind == "file_error") throw file_error(message, where);
  throw bosch::error(message, where);
}

}  // namespace detail

/// A select() callback `C` made SPMD-safe (see the file comment). Holds
/// references to the callback and the communicator.
template <class C>
class Spmd {
 public:
  Spmd(C& callback, const Communicator& comm) : c_(&callback), comm_(&comm) {}

  bool begin_search(const SearchView& v)
    requires requires(C& c, const SearchView& w) { c.begin_search(w); }
  {
    return hook([&] { return c_->begin_search(v); });
  }
  void end_search(const SearchView& v, const Result& r)
    requires requires(C& c, const SearchView& w, const Result& x) { c.end_search(w, x); }
  {
    if (comm_->root()) c_->end_search(v, r);
  }
  bool begin_stage(const SearchView& v, Stage s)
    requires requires(C& c, const SearchView& w, Stage x) { c.begin_stage(w, x); }
  {
    return hook([&] { return c_->begin_stage(v, s); });
  }
  bool end_stage(const SearchView& v, Stage s)
    requires requires(C& c, const SearchView& w, Stage x) { c.end_stage(w, x); }
  {
    return hook([&] { return c_->end_stage(v, s); });
  }
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r)
    requires requires(C& c, const SearchView& w, const EvaluationRecord& x) { c.on_evaluation(w, x); }
  {
    return hook([&] { return c_->on_evaluation(v, r); });
  }
  bool on_improvement(const SearchView& v, const EvaluationRecord& r)
    requires requires(C& c, const SearchView& w, const EvaluationRecord& x) { c.on_improvement(w, x); }
  {
    return hook([&] { return c_->on_improvement(v, r); });
  }
  std::vector<EvaluationRecord> replay_log(const SearchView& v)
    requires requires(C& c, const SearchView& w) { c.replay_log(w); }
  {
    std::string text;
    std::exception_ptr failure;
    std::vector<EvaluationRecord> log;
    if (comm_->root()) {
      try {
        log = c_->replay_log(v);
        text = detail::encode_records(log);
      } catch (...) {
        failure = std::current_exception();
        text = detail::encode_error(failure);
      }
    }
    comm_->broadcast(text);
    if (failure) std::rethrow_exception(failure);
    if (comm_->root()) return log;
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.at("ok").get<bool>()) detail::raise_error(j);
    return detail::decode_records(j, v.layout);
  }

 private:
  /// A stop vote (OR over the processes) or, for a void hook, rank 0 only.
  template <class F>
  bool hook(F&& f) {
    if constexpr (std::is_void_v<decltype(f())>) {
      if (comm_->root()) f();
      return false;
    } else {
      return comm_->any(static_cast<bool>(f()));
    }
  }
  C* c_;
  const Communicator* comm_;
};

/// bosch::select on a ParallelEvaluator with every callback wrapped in Spmd.
/// Collective: call it on every process with the same options; every process
/// returns the same Result (only rank 0's observers ran).
template <class E, class... Callbacks>
Result select(ParallelEvaluator<E>& evaluator, const Options& options, Callbacks&... callbacks) {
  return bosch::select(evaluator, options, Spmd<Callbacks>(callbacks, evaluator.communicator())...);
}

}  // namespace bosch::mpi
