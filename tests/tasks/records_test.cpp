// Tasks from JSONL records (tasks/records.hpp): both forms tokenize as the
// built-in prompt construction does, the middle cut keeps exactly the stated
// tokens, the split is deterministic and disjoint, and every bad record is
// refused with its file and line.
#include <bosch/error.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/io/sha256.hpp>
#include <bosch/tasks/tasks.hpp>

#include "tasks_support.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace bosch::tasks;

namespace {

std::filesystem::path records_file(const std::string& name, const std::string& text) {
  const auto p = bosch::test::scratch_path("records", name);
  bosch::test::write_text(p, text);
  return p;
}

std::string line(const nlohmann::json& j) { return j.dump() + "\n"; }

TaskSpec file_spec(const std::filesystem::path& path, int context, int samples, double held_out = 0) {
  TaskSpec s;
  s.kind = TaskKind::file;
  s.records = path;
  s.context_length = context;
  s.num_samples = samples;
  s.held_out_fraction = held_out;
  return s;
}

// The where() of the format_error that reading `text` raises ("" for none).
std::string refusal(const std::string& name, const std::string& text) {
  const auto p = records_file(name, text);
  try {
    (void)read_records(p);
  } catch (const bosch::format_error& e) {
    return e.where();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("records: both forms, blank lines and extra keys are read with their lines") {
  const std::string text = line({{"prompt", "Q: 2+2?\nA:"}, {"answer", "4"}, {"id", 7}}) + "\n  \n" +
                           line({{"context", "A long text."}, {"question", "What?"}, {"answer", "This"}, {"length", 3}});
  const auto p = records_file("good.jsonl", text);
  const RecordFile f = read_records(p);
  REQUIRE(f.records.size() == 2);
  CHECK_FALSE(f.records[0].chat());
  CHECK(f.records[0].line == 1);
  CHECK(f.records[0].prompt == "Q: 2+2?\nA:");
  CHECK(f.records[1].chat());
  CHECK(f.records[1].line == 4);
  CHECK(f.records[1].question == "What?");
  CHECK(f.sha256 == bosch::io::sha256_hex(text));
  CHECK(record_task_name(p) == "file:good.jsonl");
}

TEST_CASE("records: every bad record is refused with its file and line") {
  const std::string ok = line({{"prompt", "p"}, {"answer", "a"}});
  const auto where = [](const std::string& name, int l) {
    return bosch::test::scratch_path("records", name).string() + ":" + std::to_string(l);
  };
  CHECK(refusal("json.jsonl", ok + "{\"prompt\": \"p\", \"answer\": }\n") == where("json.jsonl", 2));
  CHECK(refusal("array.jsonl", ok + ok + "[1, 2]\n") == where("array.jsonl", 3));
  CHECK(refusal("noanswer.jsonl", ok + "{\"prompt\": \"p\"}\n") == where("noanswer.jsonl", 2));
  CHECK(refusal("empty.jsonl", "{\"prompt\": \"p\", \"answer\": \"  \"}\n") == where("empty.jsonl", 1));
  CHECK(refusal("number.jsonl", "{\"prompt\": \"p\", \"answer\": 4}\n") == where("number.jsonl", 1));
  CHECK(refusal("both.jsonl", "{\"prompt\": \"p\", \"context\": \"c\", \"answer\": \"a\"}\n") == where("both.jsonl", 1));
  CHECK(refusal("noquestion.jsonl", "{\"context\": \"c\", \"answer\": \"a\"}\n") == where("noquestion.jsonl", 1));
  CHECK(refusal("neither.jsonl", "{\"text\": \"c\", \"answer\": \"a\"}\n") == where("neither.jsonl", 1));
  CHECK(refusal("utf8.jsonl", ok + "{\"prompt\": \"caf\xe9\", \"answer\": \"a\"}\n") == where("utf8.jsonl", 2));
  // A file with no record is named as a whole.
  CHECK(refusal("blank.jsonl", "\n \n") == bosch::test::scratch_path("records", "blank.jsonl").string());
  CHECK_THROWS_AS(read_records(bosch::test::scratch_path("records", "missing.jsonl")), bosch::file_error);
  // The messages say what is wrong.
  try {
    (void)read_records(records_file("msg.jsonl", "{\"context\": \"c\", \"answer\": \"a\"}\n"));
    FAIL("accepted");
  } catch (const bosch::format_error& e) {
    CHECK(e.message().find("question") != std::string::npos);
  }
}

TEST_CASE("records: the split is deterministic, disjoint and sized by the fraction") {
  for (std::size_t n : {1u, 2u, 7u, 100u}) {
    for (double f : {0.0, 0.25, 0.5, 1.0}) {
      for (std::uint64_t seed : {0u, 1u, 2u}) {
        CAPTURE(n);
        CAPTURE(f);
        const auto cal = split_records(n, f, seed, Split::calibration);
        const auto held = split_records(n, f, seed, Split::held_out);
        CHECK(held.size() == static_cast<std::size_t>(std::llround(f * static_cast<double>(n))));
        CHECK(cal.size() + held.size() == n);
        std::set<std::size_t> all(cal.begin(), cal.end());
        all.insert(held.begin(), held.end());
        CHECK(all.size() == n);
        CHECK(held == split_records(n, f, seed, Split::held_out));
      }
    }
  }
  CHECK(split_records(100, 0.5, 0, Split::held_out) != split_records(100, 0.5, 1, Split::held_out));
  CHECK_THROWS_AS(split_records(10, 1.5, 0, Split::held_out), bosch::invalid_argument);
}

TEST_CASE("records: calibration and held-out samples never share a record, whatever the task seed") {
  std::string text;
  for (int i = 0; i < 40; ++i) text += line({{"prompt", "Record " + std::to_string(i) + " says"}, {"answer", "yes"}});
  const auto p = records_file("split.jsonl", text);
  const TextCodec codec = bosch::test::byte_codec();
  std::set<int> cal_lines, held_lines;
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    TaskSpec cal = file_spec(p, 64, 20, 0.5), held = cal;
    cal.seed = held.seed = seed;
    held.split = Split::held_out;
    for (const auto& s : generate(cal, codec).samples) cal_lines.insert(s.record_line);
    for (const auto& s : generate(held, codec).samples) held_lines.insert(s.record_line);
    // The same spec, the same samples; sample i does not depend on the count.
    const auto a = generate(cal, codec).samples;
    TaskSpec fewer = cal;
    fewer.num_samples = 5;
    const auto b = generate(fewer, codec).samples;
    for (std::size_t i = 0; i < b.size(); ++i) CHECK(a[i].prompt == b[i].prompt);
  }
  CHECK(cal_lines.size() == 20);
  CHECK(held_lines.size() == 20);
  for (int l : cal_lines) CHECK(held_lines.count(l) == 0);
  // More samples than the split holds: refused, naming the file.
  TaskSpec too_many = file_spec(p, 64, 21, 0.5);
  CHECK_THROWS_WITH_AS(generate(too_many, codec), doctest::Contains("20 of its 40 records"), bosch::invalid_argument);
}

TEST_CASE("records: a plain record of a built-in prompt tokenizes to the built-in sample") {
  const auto texts = bosch::test::fixture_texts();
  for (const auto& tok : {bosch::test::bpe_tokenizer(), bosch::test::spm_tokenizer()}) {
    if (!tok || texts.empty()) return;
    const TextCodec codec = codec_of(*tok);
    TaskSpec spec;
    spec.kind = TaskKind::niah_single_2;
    spec.context_length = 512;
    spec.num_samples = 3;
    spec.text_files = texts;
    spec.format = chatml();
    const TaskSet builtin = generate(spec, codec);
    std::string text;
    for (const auto& s : builtin.samples) text += line({{"prompt", s.prompt_text}, {"answer", s.answer_text}});
    const auto p = records_file("builtin.jsonl", text);
    const TaskSet mine = generate(file_spec(p, 512, 3), codec);
    REQUIRE(mine.samples.size() == 3);
    for (const auto& s : mine.samples) {
      const Sample& b = builtin.samples[static_cast<std::size_t>(s.record_line - 1)];
      CHECK(s.prompt == b.prompt);
      CHECK(s.answer == b.answer);
      CHECK(s.cut_tokens == 0);
      CHECK(s.task == "file:builtin.jsonl");
      CHECK(s.kind == TaskKind::file);
      // The answer as the gold text, for the string-match accuracy.
      CHECK(accuracy(s, b.answer_text) == 1.0);
    }
    // The answer without its leading space is joined by one: the same tokens.
    text.clear();
    for (const auto& s : builtin.samples) {
      REQUIRE(s.answer_text.front() == ' ');
      text += line({{"prompt", s.prompt_text}, {"answer", s.answer_text.substr(1)}});
    }
    const TaskSet joined = generate(file_spec(records_file("joined.jsonl", text), 512, 3), codec);
    for (const auto& s : joined.samples)
      CHECK(s.answer == builtin.samples[static_cast<std::size_t>(s.record_line - 1)].answer);
  }
}

TEST_CASE("records: a chat record is its context and question in the chat wrapper") {
  for (const auto& tok : {bosch::test::bpe_tokenizer(), bosch::test::spm_tokenizer()}) {
    if (!tok) return;
    const TextCodec codec = codec_of(*tok);
    const std::string context = "The harbour was quiet. Ships came and went.\nThe keeper's name was Ada Lovelace.";
    const std::string question = "What was the keeper's name?";
    const auto chat = records_file("chat.jsonl", line({{"context", context}, {"question", question}, {"answer", "Ada Lovelace"}}));
    const PromptFormat f = chatml();
    const auto plain = records_file("plain.jsonl", line({{"prompt", f.prefix + context + "\n\n" + question + f.suffix}, {"answer", "Ada Lovelace"}}));
    TaskSpec a = file_spec(chat, 512, 1), b = file_spec(plain, 512, 1);
    a.format = f;
    const Sample x = generate(a, codec).samples.at(0), y = generate(b, codec).samples.at(0);
    CHECK(x.prompt == y.prompt);
    CHECK(x.answer == y.answer);
    CHECK(x.answer_text == "Ada Lovelace");  // after the suffix's newline: no space
    CHECK(tok->decode(std::span<const int>(x.prompt).subspan(static_cast<std::size_t>(x.context_begin),
                                                            static_cast<std::size_t>(x.context_end - x.context_begin))) == context);
    // Without a chat format the answer follows after one space.
    const Sample z = generate(file_spec(chat, 512, 1), codec).samples.at(0);
    CHECK(z.answer_text == " Ada Lovelace");
    CHECK(z.prompt_text == context + "\n\n" + question);
  }
}

TEST_CASE("records: a long record is cut in the middle to exactly the context, or refused") {
  const TextCodec codec = bosch::test::byte_codec();  // one token per byte: exact counts
  std::string context;
  for (int i = 0; i < 300; ++i) context += static_cast<char>('a' + i % 26);
  const std::string question = "Which letter?";
  const auto p = records_file("long.jsonl", line({{"context", context}, {"question", question}, {"answer", "q"}}) +
                                                line({{"prompt", context}, {"answer", "z"}}));
  for (int limit : {100, 101, 250}) {
    CAPTURE(limit);
    const TaskSet set = generate(file_spec(p, limit, 2), codec);
    for (const Sample& s : set.samples) {
      const bool chat = s.record_line == 1;
      CHECK(static_cast<int>(s.prompt.size() + s.answer.size()) == limit);
      const int fixed = 1 + (chat ? 2 + static_cast<int>(question.size()) : 0) + 2;  // BOS, "\n\n"+question, " q"
      const int keep = limit - fixed;
      CHECK(s.cut_tokens == 300 - keep);
      CHECK(s.context_end - s.context_begin == keep);
      const std::string kept = codec.decode(std::span<const int>(s.prompt).subspan(static_cast<std::size_t>(s.context_begin),
                                                                                 static_cast<std::size_t>(keep)));
      CHECK(kept == context.substr(0, static_cast<std::size_t>((keep + 1) / 2)) +
                        context.substr(context.size() - static_cast<std::size_t>(keep / 2)));
      if (chat) {
        CHECK(codec.decode(std::span<const int>(s.prompt).subspan(static_cast<std::size_t>(s.context_end))) == "\n\n" + question);
      }
    }
    CHECK(set.description.find("2 cut in the middle") != std::string::npos);
  }
  // Short enough: not cut, at its own length.
  const Sample whole = generate(file_spec(p, 1000, 1), codec).samples.at(0);
  CHECK(whole.cut_tokens == 0);
  CHECK(whole.prompt.size() + whole.answer.size() < 1000);
  // Refused when asked, naming the file and line.
  TaskSpec refuse = file_spec(p, 250, 2);
  refuse.truncation = Truncation::refuse;
  CHECK_THROWS_WITH_AS(generate(refuse, codec), doctest::Contains("long.jsonl:"), bosch::invalid_argument);
  // No room for the context at all.
  CHECK_THROWS_WITH_AS(generate(file_spec(p, 18, 2), codec), doctest::Contains("would remain"), bosch::invalid_argument);
}

TEST_CASE("records: an answer that tokenizes to nothing is refused with its line") {
  TextCodec codec = bosch::test::byte_codec();
  auto bytes = codec.encode;
  codec.encode = [bytes](std::string_view text, bool special) {
    std::vector<int> ids = bytes(text, special);
    std::erase(ids, static_cast<int>('~'));  // '~' is not in this vocabulary
    return ids;
  };
  const auto p = records_file("tilde.jsonl", line({{"prompt", "p"}, {"answer", "a"}}) + line({{"prompt", "p"}, {"answer", "~~"}}));
  TaskSpec spec = file_spec(p, 64, 2);
  CHECK_THROWS_WITH_AS(generate(spec, codec), doctest::Contains("tilde.jsonl:2: the answer tokenizes to nothing"),
                       bosch::format_error);
}

TEST_CASE("records: task lists name files, suites read them before any model work") {
  const auto p = records_file("suite.jsonl", line({{"prompt", "p"}, {"answer", "a"}}));
  const auto list = bosch::parse_task_list("passkey, file:" + p.string());
  REQUIRE(list.size() == 2);
  CHECK(list[0] == TaskSource(TaskKind::passkey));
  CHECK(list[1].kind == TaskKind::file);
  CHECK(list[1].file == p);
  CHECK(bosch::task_list_string(list) == "passkey,file:" + p.string());
  CHECK_THROWS_WITH_AS(bosch::parse_task_list("file:"), doctest::Contains("needs a path"), bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(bosch::parse_task_list("needle"), doctest::Contains("file:PATH.jsonl"), bosch::invalid_argument);
  bosch::TaskSuiteOptions o;
  o.kinds = list;
  o.held_out_fraction = 0;
  const auto bad = records_file("suite-bad.jsonl", line({{"prompt", "p"}, {"answer", "a"}}) + "{oops\n");
  o.kinds.push_back(TaskSource(TaskKind::file, bad));
  CHECK_THROWS_WITH_AS(bosch::validate(o), doctest::Contains("suite-bad.jsonl:2"), bosch::format_error);
  o.kinds.pop_back();
  const nlohmann::json j = bosch::to_json(o);
  REQUIRE(j.contains("task_files"));
  CHECK(j["task_files"][0]["sha256"] == read_records(p).sha256);
  CHECK(j["task_files"][0]["file"] == "suite.jsonl");
  CHECK(j["task_files"][0]["calibration_records"] == 1);
  bosch::TaskSuiteOptions back;
  bosch::update_from_json(back, j, "test");
  CHECK(back.kinds == o.kinds);
  CHECK(back.held_out_fraction == 0);
  // Scoring a mask on a file that changed since it was chosen is refused.
  CHECK_NOTHROW(bosch::check_task_files(j, o, "mask.json"));
  CHECK_NOTHROW(bosch::check_task_files(nlohmann::json::object(), o, "mask.json"));
  bosch::test::write_text(p, line({{"prompt", "p"}, {"answer", "bb"}}));  // another size: the cache sees it
  CHECK_THROWS_WITH_AS(bosch::check_task_files(j, o, "mask.json"), doctest::Contains("changed since the mask was chosen"),
                       bosch::invalid_argument);
}
