// The Options field table: one list drives validation and the JSON form.
#include <doctest/doctest.h>

#include <bosch/bosch.hpp>
#include <bosch/io/options_json.hpp>

#include <set>
#include <string>

TEST_CASE("the field table names every Options field once and round-trips through JSON") {
  std::set<std::string> names, cli;
  std::size_t fields = 0;
  bosch::for_each_option([&](const auto& f) {
    ++fields;
    CHECK(names.insert(std::string(f.name)).second);
    std::string c = f.cli.empty() ? std::string(f.name) : std::string(f.cli);
    CHECK(cli.insert(c).second);
    CHECK_FALSE(f.help.empty());
  });
  const nlohmann::json j = bosch::options_to_json(bosch::Options{});
  CHECK(j.size() == fields);
  for (const auto& n : names) CHECK(j.contains(n));
  // Every non-default value survives the round trip.
  bosch::Options o;
  o.target_ratio = 0.75;
  o.seed = 9;
  o.variant = bosch::Variant::multi;
  o.ratio_levels = {0.25, 0.5};
  o.inner_solver = bosch::InnerSolver::penalized;
  o.accept_equal = false;
  o.batch_size = 3;
  const bosch::Options back = bosch::options_from_json(bosch::options_to_json(o));
  CHECK(bosch::options_to_json(back) == bosch::options_to_json(o));
  // The identity leaves out the run-control fields only.
  const nlohmann::json id = bosch::options_identity(o);
  CHECK_FALSE(id.contains("batch_size"));
  CHECK_FALSE(id.contains("max_evaluations"));
  CHECK(id.contains("seed"));
  CHECK(id.size() == fields - 2);
}

TEST_CASE("validate() reports the field of a bad value; JSON reports wrong types by key") {
  bosch::Options o;
  o.lambda = 0;
  CHECK_THROWS_WITH_AS(bosch::validate(o), doctest::Contains("lambda"), bosch::invalid_argument);
  o = {};
  o.max_evaluations = 2;
  CHECK_THROWS_WITH_AS(bosch::validate(o), doctest::Contains("max_evaluations"),
                       bosch::invalid_argument);
  o = {};
  o.ratio_levels = {0.5, 1.5};
  CHECK_THROWS_WITH_AS(bosch::validate(o), doctest::Contains("ratio_levels"),
                       bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(bosch::options_from_json({{"lambda", 2.5}}),
                       doctest::Contains("options: lambda"), bosch::format_error);
  CHECK_THROWS_WITH_AS(bosch::options_from_json({{"variant", "fast"}}),
                       doctest::Contains("expected one of: full, single, multi, layer"),
                       bosch::format_error);
  CHECK_THROWS_WITH_AS(bosch::options_from_json({{"nope", 1}}), doctest::Contains("unknown"),
                       bosch::format_error);
  CHECK_THROWS_AS(bosch::options_from_json({{"accept_equal", 1}}), bosch::format_error);
}

TEST_CASE("layout text form: to_string and parse_layout") {
  CHECK(bosch::to_string(bosch::HeadLayout{30, 9, 3}) == "30x9x3");
  CHECK(bosch::parse_layout("30x9x3") == bosch::HeadLayout{30, 9, 3});
  CHECK(bosch::parse_layout("5X4") == bosch::HeadLayout{5, 4, 4});
  for (const char* bad : {"", "x9x3", "30x9x3x1", "30x-9x3", "30x8x3", "99999999x1x1"})
    CHECK_THROWS_AS(bosch::parse_layout(bad), bosch::invalid_argument);
  CHECK(bosch::parse_layout("30x9") == bosch::HeadLayout{30, 9, 9});
}
