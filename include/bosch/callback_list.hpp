// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file callback_list.hpp
/// CallbackList: callbacks of any types, chosen at run time, for code that
/// cannot name their types at compile time (a compiled run function, the
/// Python binding, a command line that adds a log writer only when asked).
/// bosch::select takes a callback list as two callbacks:
///
/// @code
/// bosch::CallbackList callbacks;
/// bosch::ProgressReporter progress;
/// callbacks.add(progress);                          // by reference
/// callbacks.own(bosch::EarlyStop{.patience = 50});  // moved in, kept by the list
/// bosch::Result r = bosch::select(evaluator, options, callbacks.observers(), callbacks.voters());
/// @endcode
///
/// Each hook of each callback keeps its nature (callbacks.hpp): a hook that
/// returns void is an *observer* (progress lines, logs, checkpoint files), one
/// that returns something convertible to bool may ask to stop, a *vote*.
/// observers() runs the void hooks (and replay_log), voters() the voting
/// ones, each in the order the callbacks were added. Keeping the two apart
/// lets a parallel search run observers on one process and count votes on
/// every process (bosch::mpi::Spmd, bosch/mpi/select.hpp).

#include <bosch/callbacks.hpp>

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch {

class CallbackList {
  struct Entry {
    // Observers (void hooks), replay and the end of the search.
    std::function<void(const SearchView&)> begin_search_o;
    std::function<void(const SearchView&, const Result&)> end_search;
    std::function<void(const SearchView&, Stage)> begin_stage_o, end_stage_o;
    std::function<void(const SearchView&, const EvaluationRecord&)> on_evaluation_o, on_improvement_o;
    std::function<std::vector<EvaluationRecord>(const SearchView&)> replay_log;
    // Votes (hooks that return a stop request).
    std::function<bool(const SearchView&)> begin_search_v;
    std::function<bool(const SearchView&, Stage)> begin_stage_v, end_stage_v;
    std::function<bool(const SearchView&, const EvaluationRecord&)> on_evaluation_v, on_improvement_v;
  };

  /// Puts `call` (a hook returning R) into the observer slot `o` when R is
  /// void, else, as a stop request, into the voting slot `v`.
  template <class R, class O, class V, class F>
  static void sort(O& o, V& v, F call) {
    if constexpr (std::is_void_v<R>)
      o = std::move(call);
    else
      v = [call = std::move(call)](const auto&... a) -> bool { return static_cast<bool>(call(a...)); };
  }

  template <class C>
  static Entry entry_of(C* c) {
    using V = const SearchView&;
    using E = const EvaluationRecord&;
    Entry e;
    if constexpr (requires(V w) { c->begin_search(w); })
      sort<decltype(c->begin_search(std::declval<V>()))>(e.begin_search_o, e.begin_search_v,
                                                          [c](V w) { return c->begin_search(w); });
    if constexpr (requires(V w, const Result& r) { c->end_search(w, r); })
      e.end_search = [c](V w, const Result& r) { c->end_search(w, r); };
    if constexpr (requires(V w, Stage s) { c->begin_stage(w, s); })
      sort<decltype(c->begin_stage(std::declval<V>(), Stage::anchors))>(
          e.begin_stage_o, e.begin_stage_v, [c](V w, Stage s) { return c->begin_stage(w, s); });
    if constexpr (requires(V w, Stage s) { c->end_stage(w, s); })
      sort<decltype(c->end_stage(std::declval<V>(), Stage::anchors))>(
          e.end_stage_o, e.end_stage_v, [c](V w, Stage s) { return c->end_stage(w, s); });
    if constexpr (requires(V w, E r) { c->on_evaluation(w, r); })
      sort<decltype(c->on_evaluation(std::declval<V>(), std::declval<E>()))>(
          e.on_evaluation_o, e.on_evaluation_v, [c](V w, E r) { return c->on_evaluation(w, r); });
    if constexpr (requires(V w, E r) { c->on_improvement(w, r); })
      sort<decltype(c->on_improvement(std::declval<V>(), std::declval<E>()))>(
          e.on_improvement_o, e.on_improvement_v, [c](V w, E r) { return c->on_improvement(w, r); });
    if constexpr (requires(V w) { c->replay_log(w); })
      e.replay_log = [c](V w) { return c->replay_log(w); };
    return e;
  }

 public:
  CallbackList() = default;
  CallbackList(const CallbackList&) = delete;
  CallbackList& operator=(const CallbackList&) = delete;

  /// Adds `callback` by reference: it must outlive every search run with this list.
  template <class C>
  CallbackList& add(C& callback) {
    entries_.push_back(entry_of(&callback));
    return *this;
  }
  /// Adds a copy of `callback`, kept by the list.
  template <class C>
  CallbackList& own(C callback) {
    auto p = std::make_shared<std::decay_t<C>>(std::move(callback));
    owned_.push_back(p);
    entries_.push_back(entry_of(p.get()));
    return *this;
  }
  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }

  /// The observer hooks of every callback, as one callback (hooks return void).
  class Observers {
   public:
    void begin_search(const SearchView& v) { each(&Entry::begin_search_o, v); }
    void end_search(const SearchView& v, const Result& r) { each(&Entry::end_search, v, r); }
    void begin_stage(const SearchView& v, Stage s) { each(&Entry::begin_stage_o, v, s); }
    void end_stage(const SearchView& v, Stage s) { each(&Entry::end_stage_o, v, s); }
    void on_evaluation(const SearchView& v, const EvaluationRecord& r) { each(&Entry::on_evaluation_o, v, r); }
    void on_improvement(const SearchView& v, const EvaluationRecord& r) { each(&Entry::on_improvement_o, v, r); }
    /// The first non-empty replay of the callbacks that replay (a checkpoint).
    std::vector<EvaluationRecord> replay_log(const SearchView& v) {
      for (auto& e : list_->entries_)
        if (e.replay_log) {
          auto log = e.replay_log(v);
          if (!log.empty()) return log;
        }
      return {};
    }

   private:
    friend class CallbackList;
    explicit Observers(CallbackList* l) : list_(l) {}
    template <class M, class... A>
    void each(M Entry::*hook, const A&... a) {
      for (auto& e : list_->entries_)
        if (e.*hook) (e.*hook)(a...);
    }
    CallbackList* list_;
  };

  /// The voting hooks of every callback, as one callback: each returns true
  /// when any callback asked to stop (every callback's hook is called).
  class Voters {
   public:
    bool begin_search(const SearchView& v) { return any(&Entry::begin_search_v, v); }
    bool begin_stage(const SearchView& v, Stage s) { return any(&Entry::begin_stage_v, v, s); }
    bool end_stage(const SearchView& v, Stage s) { return any(&Entry::end_stage_v, v, s); }
    bool on_evaluation(const SearchView& v, const EvaluationRecord& r) { return any(&Entry::on_evaluation_v, v, r); }
    bool on_improvement(const SearchView& v, const EvaluationRecord& r) {
      return any(&Entry::on_improvement_v, v, r);
    }

   private:
    friend class CallbackList;
    explicit Voters(CallbackList* l) : list_(l) {}
    template <class M, class... A>
    bool any(M Entry::*hook, const A&... a) {
      bool stop = false;
      for (auto& e : list_->entries_)
        if (e.*hook) stop = (e.*hook)(a...) || stop;
      return stop;
    }
    CallbackList* list_;
  };

  Observers observers() { return Observers(this); }
  Voters voters() { return Voters(this); }

 private:
  std::vector<Entry> entries_;
  std::vector<std::shared_ptr<void>> owned_;
};

}  // namespace bosch
