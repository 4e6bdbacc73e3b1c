// SPDX-License-Identifier: Apache-2.0
// Held-out reports as JSON (see bosch/eval/report.hpp).

#include <bosch/eval/report.hpp>

#include <cmath>
#include <limits>
#include <string>

namespace bosch {

namespace {
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double read_number(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}
TaskScore score_from(const nlohmann::json& j) {
  TaskScore t;
  t.task = j.at("task").get<std::string>();
  t.samples = j.at("samples").get<int>();
  t.mean_logprob = read_number(j.at("mean_logprob"));
  t.probability = read_number(j.at("probability"));
  t.accuracy = read_number(j.at("accuracy"));
  t.exact = read_number(j.at("exact"));
  return t;
}
}  // namespace

nlohmann::json task_score_json(const TaskScore& t) {
  return nlohmann::json{{"task", t.task},
                        {"samples", t.samples},
                        {"mean_logprob", number(t.mean_logprob)},
                        {"probability", number(t.probability)},
                        {"accuracy", number(t.accuracy)},
                        {"exact", number(t.exact)}};
}

nlohmann::json held_out_json(const HeldOutReport& r) {
  nlohmann::json per = nlohmann::json::array();
  for (const auto& t : r.per_task) per.push_back(task_score_json(t));
  return nlohmann::json{{"all", task_score_json(r.all)}, {"per_task", per}};
}

HeldOutReport held_out_from_json(const nlohmann::json& j) {
  HeldOutReport r;
  r.all = score_from(j.at("all"));
  for (const auto& t : j.at("per_task")) r.per_task.push_back(score_from(t));
  return r;
}

}  // namespace bosch
