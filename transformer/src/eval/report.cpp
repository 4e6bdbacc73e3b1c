// SPDX-License-Identifier: Apache-2.0
// Held-out report summaries, paired differences and JSON (see bosch/eval/report.hpp).

#include <bosch/error.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/io/json_number.hpp>

#include <cmath>
#include <limits>
#include <map>

namespace bosch {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

double metric_of(const SampleScore& s, HeldOutMetric m) {
  switch (m) {
    case HeldOutMetric::logprob: return s.logprob;
    case HeldOutMetric::accuracy: return s.accuracy;
    case HeldOutMetric::exact: return s.exact;
    case HeldOutMetric::match: return s.match;
  }
  return nan;
}

/// Stratum ids of `samples` (tasks numbered in first-appearance order) and the task names.
std::vector<std::size_t> strata_of(const std::vector<SampleScore>& samples, std::vector<std::string>* names = nullptr) {
  std::map<std::string, std::size_t> id;
  std::vector<std::size_t> out;
  out.reserve(samples.size());
  for (const auto& s : samples) {
    const auto [it, inserted] = id.try_emplace(s.task, id.size());
    if (inserted && names) names->push_back(s.task);
    out.push_back(it->second);
  }
  return out;
}

/// Summary of the samples whose stratum is `only` (all when only == npos).
TaskScore summarize(const std::string& name, const std::vector<SampleScore>& samples,
                    const std::vector<std::size_t>& strata, std::size_t only, const eval::BootstrapOptions& o) {
  TaskScore t;
  t.task = name;
  std::vector<double> lp, acc, ex, ma;
  std::vector<std::size_t> st, ma_st;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (only != std::string::npos && strata[i] != only) continue;
    lp.push_back(samples[i].logprob);
    acc.push_back(samples[i].accuracy);
    ex.push_back(samples[i].exact);
    st.push_back(strata[i]);
    if (std::isfinite(samples[i].match)) {  // file tasks only
      ma.push_back(samples[i].match);
      ma_st.push_back(strata[i]);
    }
  }
  t.samples = static_cast<int>(lp.size());
  if (lp.empty()) return t;
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  t.mean_logprob = mean(lp);
  t.probability = std::exp(t.mean_logprob);
  t.accuracy = mean(acc);
  t.exact = mean(ex);
  t.logprob_ci = eval::bootstrap_mean_ci(lp, st, o);
  t.probability_ci = {std::exp(t.logprob_ci.low), std::exp(t.logprob_ci.high)};
  t.accuracy_ci = eval::bootstrap_mean_ci(acc, st, o);
  t.exact_ci = eval::bootstrap_mean_ci(ex, st, o);
  if (!ma.empty()) {
    t.match = mean(ma);
    t.match_ci = eval::bootstrap_mean_ci(ma, ma_st, o);
  } else {
    t.match_ci = {nan, nan};
  }
  return t;
}

nlohmann::json interval(const eval::Interval& i) { return nlohmann::json::array({io::json_number(i.low), io::json_number(i.high)}); }

}  // namespace

const char* to_string(HeldOutMetric metric) noexcept {
  switch (metric) {
    case HeldOutMetric::logprob: return "logprob";
    case HeldOutMetric::accuracy: return "accuracy";
    case HeldOutMetric::exact: return "exact";
    case HeldOutMetric::match: return "match";
  }
  return "?";
}

HeldOutReport summarize_held_out(std::vector<SampleScore> samples, const eval::BootstrapOptions& options) {
  eval::validate(options);
  HeldOutReport r;
  std::vector<std::string> names;
  const auto strata = strata_of(samples, &names);
  r.all = summarize("all", samples, strata, std::string::npos, options);
  for (std::size_t k = 0; k < names.size(); ++k) r.per_task.push_back(summarize(names[k], samples, strata, k, options));
  r.samples = std::move(samples);
  return r;
}

eval::PairedDifference paired_difference(const HeldOutReport& a, const HeldOutReport& b, HeldOutMetric metric,
                                         const std::string& task, const eval::BootstrapOptions& options,
                                         const std::string& where) {
  eval::PairedDifference out;
  if (a.samples.empty() || b.samples.empty()) return out;
  if (a.samples.size() != b.samples.size())
    throw invalid_argument("the reports hold " + std::to_string(a.samples.size()) + " and " +
                               std::to_string(b.samples.size()) + " samples; a paired comparison needs the same samples",
                           where);
  for (std::size_t i = 0; i < a.samples.size(); ++i)
    if (a.samples[i].task != b.samples[i].task)
      throw invalid_argument("sample " + std::to_string(i) + " belongs to task '" + a.samples[i].task + "' in one report and '" +
                                 b.samples[i].task + "' in the other",
                             where);
  const auto strata = strata_of(a.samples);
  std::vector<double> x, y;
  std::vector<std::size_t> st;
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    if (task != "all" && a.samples[i].task != task) continue;
    // match exists for file tasks only: the other samples do not take part.
    if (metric == HeldOutMetric::match &&
        !(std::isfinite(metric_of(a.samples[i], metric)) && std::isfinite(metric_of(b.samples[i], metric))))
      continue;
    x.push_back(metric_of(a.samples[i], metric));
    y.push_back(metric_of(b.samples[i], metric));
    st.push_back(strata[i]);
  }
  return eval::paired_bootstrap(x, y, st, options);
}

nlohmann::json to_json(const TaskScore& t) {
  nlohmann::json j{{"task", t.task},
                   {"samples", t.samples},
                   {"mean_logprob", io::json_number(t.mean_logprob)},
                   {"probability", io::json_number(t.probability)},
                   {"accuracy", io::json_number(t.accuracy)},
                   {"exact", io::json_number(t.exact)},
                   {"logprob_ci", interval(t.logprob_ci)},
                   {"probability_ci", interval(t.probability_ci)},
                   {"accuracy_ci", interval(t.accuracy_ci)},
                   {"exact_ci", interval(t.exact_ci)}};
  if (std::isfinite(t.match)) {
    j["match"] = io::json_number(t.match);
    j["match_ci"] = interval(t.match_ci);
  }
  return j;
}

nlohmann::json to_json(const HeldOutReport& r, bool with_samples) {
  nlohmann::json per = nlohmann::json::array();
  for (const auto& t : r.per_task) per.push_back(to_json(t));
  nlohmann::json j{{"all", to_json(r.all)}, {"per_task", per}};
  if (with_samples) {
    nlohmann::json task = nlohmann::json::array(), lp = task, acc = task, ex = task, ma = task;
    bool any_match = false;
    for (const auto& s : r.samples) {
      task.push_back(s.task);
      lp.push_back(io::json_number(s.logprob));
      acc.push_back(io::json_number(s.accuracy));
      ex.push_back(io::json_number(s.exact));
      ma.push_back(io::json_number(s.match));
      any_match = any_match || std::isfinite(s.match);
    }
    j["samples"] = {{"task", task}, {"logprob", lp}, {"accuracy", acc}, {"exact", ex}};
    if (any_match) j["samples"]["match"] = ma;
  }
  return j;
}

HeldOutReport held_out_report_from_json(const nlohmann::json& j, const std::string& where,
                                        const eval::BootstrapOptions& options) {
  try {
    if (j.contains("samples")) {
      const auto& s = j.at("samples");
      const auto& task = s.at("task");
      const auto& lp = s.at("logprob");
      const auto& acc = s.at("accuracy");
      const auto& ex = s.at("exact");
      if (!task.is_array() || lp.size() != task.size() || acc.size() != task.size() || ex.size() != task.size())
        throw format_error("samples: task, logprob, accuracy and exact must be arrays of one length", where);
      const nlohmann::json none;
      const auto& ma = s.contains("match") ? s.at("match") : none;
      if (!ma.is_null() && ma.size() != task.size())
        throw format_error("samples: match must be an array as long as task", where);
      std::vector<SampleScore> samples;
      for (std::size_t i = 0; i < task.size(); ++i)
        samples.push_back({task[i].get<std::string>(), io::json_double(lp[i]), io::json_double(acc[i]), io::json_double(ex[i]),
                           ma.is_null() ? nan : io::json_double(ma[i])});
      return summarize_held_out(std::move(samples), options);
    }
    auto score = [](const nlohmann::json& t) {
      TaskScore s;
      s.task = t.at("task").get<std::string>();
      s.samples = t.at("samples").get<int>();
      s.mean_logprob = io::json_double(t.at("mean_logprob"));
      s.probability = io::json_double(t.at("probability"));
      s.accuracy = io::json_double(t.at("accuracy"));
      s.exact = io::json_double(t.at("exact"));
      s.match = t.contains("match") ? io::json_double(t.at("match")) : nan;
      return s;
    };
    HeldOutReport r;
    r.all = score(j.at("all"));
    for (const auto& t : j.at("per_task")) r.per_task.push_back(score(t));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("malformed held-out report: ") + e.what(), where);
  }
}

}  // namespace bosch
