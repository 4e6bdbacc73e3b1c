// Word lists, random keys and values, sentence splitting of natural text.
#include <bosch/error.hpp>
#include <bosch/tasks/text.hpp>
#include <bosch/tasks/words.hpp>

#include "tasks_support.hpp"

#include <algorithm>
#include <regex>
#include <set>
#include <string>

using namespace bosch::tasks;

TEST_CASE("tasks words: lists are distinct lower-case words") {
  std::set<std::string_view> all;
  for (auto list : {adjectives(), nouns()}) {
    CHECK(list.size() >= 250);
    std::set<std::string_view> unique(list.begin(), list.end());
    CHECK(unique.size() == list.size());
    for (auto w : list) {
      CHECK_FALSE(w.empty());
      CHECK(std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; }));
      all.insert(w);
    }
  }
  CHECK(all.size() == adjectives().size() + nouns().size());  // no word in both lists
}

TEST_CASE("tasks words: keys, numbers and UUIDs have RULER's forms and follow the seed") {
  boost::random::mt19937_64 a(bosch::test::seed(2)), b(bosch::test::seed(2));
  const std::regex uuid4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> keys;
  for (int i = 0; i < 200; ++i) {
    const std::string k = random_word_key(a);
    CHECK(k == random_word_key(b));
    const auto dash = k.find('-');
    REQUIRE(dash != std::string::npos);
    CHECK(std::find(adjectives().begin(), adjectives().end(), k.substr(0, dash)) !=
          adjectives().end());
    CHECK(std::find(nouns().begin(), nouns().end(), k.substr(dash + 1)) != nouns().end());
    keys.insert(k);
    const std::string n7 = random_number(a, 7), n5 = random_number(a, 5);
    CHECK(n7 == random_number(b, 7));
    CHECK(n5 == random_number(b, 5));
    CHECK(n7.size() == 7);
    CHECK(n7[0] != '0');
    CHECK(n5.size() == 5);
    const std::string u = random_uuid(a);
    CHECK(u == random_uuid(b));
    CHECK(std::regex_match(u, uuid4));
  }
  CHECK(keys.size() > 190);  // ~97k combinations: few collisions among 200
  CHECK_THROWS_AS(random_number(a, 0), bosch::invalid_argument);
  const std::string w = random_words(a, 12);
  CHECK(std::count(w.begin(), w.end(), ' ') == 11);
}

TEST_CASE("tasks text: sentence splitting") {
  const std::string text =
      "EMMA\n\nBy Jane Austen\n\n\nCHAPTER I\n\n\n"
      "Mr. Knightley, a sensible man about\nseven or eight-and-thirty, was _very_ glad. He\n"
      "came in.  \"Is it so?\" said she.  \"Yes!\" He smiled. E. Dashwood left? No.\n\n"
      "Last paragraph without an end";
  const auto s = split_sentences(text);
  REQUIRE(s.size() == 7);
  CHECK(s[0] == "Mr. Knightley, a sensible man about seven or eight-and-thirty, was very glad.");
  CHECK(s[1] == "He came in.");
  CHECK(s[2] == "\"Is it so?\" said she.");
  CHECK(s[3] == "\"Yes!\"");
  CHECK(s[4] == "He smiled.");
  CHECK(s[5] == "E. Dashwood left?");
  CHECK(s[6] == "No.");
  // The last paragraph has 5 words and no punctuation: treated as a heading.
}

TEST_CASE("tasks text: the fixture novels and the split regions") {
  const auto files = bosch::test::fixture_texts();
  if (files.empty()) return;
  const Corpus c = load_corpus(files);
  REQUIRE(c.sentences.size() == 2);
  for (const auto& ss : c.sentences) {
    CHECK(ss.size() > 3000);
    for (const auto& s : ss) {
      REQUIRE_FALSE(s.empty());
      CHECK(s.find('\n') == std::string::npos);
      CHECK(s.find("  ") == std::string::npos);
      CHECK(s.front() != ' ');
      CHECK(s.back() != ' ');
    }
  }
  CHECK(c.sentences[0][0].rfind("Emma Woodhouse, handsome, clever, and rich", 0) == 0);
  const auto cal = split_region(101, Split::calibration), held = split_region(101, Split::held_out);
  CHECK(cal.begin == 0);
  CHECK(cal.end == held.begin);
  CHECK(held.end == 101);
  CHECK_THROWS_AS(load_corpus({"/nonexistent/file.txt"}), bosch::file_error);
}
