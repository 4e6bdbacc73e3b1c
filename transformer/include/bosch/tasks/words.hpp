// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/words.hpp
/// Built-in word lists and the random keys/values of the NIAH tasks. RULER
/// draws word keys "adjective-noun" from the wonderwords lists; these lists are
/// our own (a few hundred common English adjectives and nouns, lower case,
/// ASCII, no duplicates), so nothing is downloaded.

#include <boost/random/mersenne_twister.hpp>

#include <span>
#include <string>
#include <string_view>

namespace bosch::tasks {

std::span<const std::string_view> adjectives() noexcept;
std::span<const std::string_view> nouns() noexcept;

/// "adjective-noun", each uniform from the lists (RULER type "words").
std::string random_word_key(boost::random::mt19937_64& rng);
/// A uniform integer with exactly `digits` decimal digits (1 <= digits <= 18),
/// as text: RULER "numbers" use 7, passkey 5.
std::string random_number(boost::random::mt19937_64& rng, int digits);
/// A random version-4 UUID in lower-case 8-4-4-4-12 form (RULER "uuids").
std::string random_uuid(boost::random::mt19937_64& rng);
/// `count` words drawn uniformly from adjectives() and nouns() together,
/// joined by single spaces (the copy task's random span).
std::string random_words(boost::random::mt19937_64& rng, int count);

}  // namespace bosch::tasks
