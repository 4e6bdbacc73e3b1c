// SPDX-License-Identifier: Apache-2.0
// Per-sample checkpoints of held-out reports (see bosch/eval/report_checkpoint.hpp).

#include <bosch/error.hpp>
#include <bosch/eval/report_checkpoint.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/json_number.hpp>
#include <bosch/io/sha256.hpp>

#include <cstring>
#include <fstream>

namespace bosch {
namespace {

constexpr const char* kKind = "bosch held-out checkpoint";


}  // namespace

std::string samples_digest(const tasks::TaskSet& set) {
  std::string bytes;
  auto put = [&](int v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (const auto& s : set.samples) {
    bytes += s.task;
    bytes += '\0';
    put(static_cast<int>(s.prompt.size()));
    for (int t : s.prompt) put(t);
    put(static_cast<int>(s.answer.size()));
    for (int t : s.answer) put(t);
  }
  return io::sha256_hex(bytes);
}

ReportCheckpoint::ReportCheckpoint(std::filesystem::path path, nlohmann::json identity)
    : path_(std::move(path)), lock_(path_.string() + ".lock", "the checkpoint " + path_.string()) {
  identity["kind"] = kKind;
  std::error_code ec;
  if (std::filesystem::exists(path_, ec) && std::filesystem::file_size(path_, ec) > 0) {
    const std::string text = io::read_file(path_, io::max_file_bytes, "a checkpoint");
    std::size_t pos = 0;
    bool first = true;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      const bool torn = end == std::string::npos;  // killed while writing it: dropped
      if (torn) break;
      const std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        throw format_error("not a held-out checkpoint (a line is not JSON)", path_.string());
      }
      if (first) {
        first = false;
        if (!j.is_object() || j.value("kind", "") != kKind)
          throw format_error("not a held-out checkpoint of bosch evaluate", path_.string());
        for (auto it = identity.begin(); it != identity.end(); ++it)
          if (!j.contains(it.key()) || j[it.key()] != it.value())
            throw invalid_argument("holds the scores of another evaluation (its " + it.key() +
                                       " differs); remove it or name another --checkpoint",
                                   path_.string());
        continue;
      }
      try {
        const std::string row = j.at("row").get<std::string>();
        const auto sample = j.at("sample").get<std::size_t>();
        SampleScore s{j.at("task").get<std::string>(), io::json_double(j.at("logprob")), io::json_double(j.at("accuracy")),
                      io::json_double(j.at("exact")), io::json_double(j.value("match", nlohmann::json()))};
        scores_[{row, sample}] = std::move(s);
      } catch (const nlohmann::json::exception&) {
        throw format_error("a malformed record in a held-out checkpoint", path_.string());
      }
    }
    if (first) throw format_error("not a held-out checkpoint (no identity line)", path_.string());
    resumed_ = scores_.size();
    // Drop a torn last line so that appends start on a line of their own.
    if (pos < text.size()) std::filesystem::resize_file(path_, pos);
  } else {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << identity.dump() << '\n';
    out.flush();
    if (!out) throw file_error(std::string("cannot write: ") + std::strerror(errno), path_.string());
  }
}

std::vector<std::optional<SampleScore>> ReportCheckpoint::done(const std::string& row, std::size_t samples) const {
  std::vector<std::optional<SampleScore>> out(samples);
  for (const auto& [key, s] : scores_)
    if (key.first == row && key.second < samples) out[key.second] = s;
  return out;
}

void ReportCheckpoint::record(const std::string& row, std::size_t sample, const SampleScore& score) {
  const nlohmann::json j{{"row", row},
                         {"sample", sample},
                         {"task", score.task},
                         {"logprob", io::json_number(score.logprob)},
                         {"accuracy", io::json_number(score.accuracy)},
                         {"exact", io::json_number(score.exact)},
                         {"match", io::json_number(score.match)}};
  std::ofstream out(path_, std::ios::binary | std::ios::app);
  out << j.dump() << '\n';
  out.flush();
  if (!out) throw file_error(std::string("cannot append: ") + std::strerror(errno), path_.string());
  scores_[{row, sample}] = score;
}

}  // namespace bosch
