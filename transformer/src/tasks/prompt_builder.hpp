// SPDX-License-Identifier: Apache-2.0
// Internal to bosch::tasks: token-exact prompt assembly (see generate.hpp).
#pragma once

#include "haystack.hpp"
#include "segment_encoder.hpp"

#include <string>
#include <vector>

namespace bosch::tasks::detail {

/// The fixed text of a prompt around its context.
struct Layout {
  std::string prefix;         ///< chat prefix (control tokens parsed)
  std::string header;         ///< task text before the context (ends with "\n" or is empty)
  std::string question;       ///< task text after the context
  std::string suffix;         ///< chat suffix (control tokens parsed)
  std::string answer_prefix;  ///< start of the model's turn
  std::string answer;         ///< expected continuation, leading space included
  std::string unit_sep;       ///< between haystack units
  std::string needle_sep;     ///< before and after a needle
  bool truncatable = false;   ///< the last haystack unit may be cut at a word
};

/// A context item: a haystack unit or a needle.
struct Item {
  Unit unit;
  int needle = -1;        ///< needle index, or -1 for a haystack unit
  std::string lead;       ///< separator the ids were computed with
  std::vector<int> ids;   ///< tokens of lead + unit.text
  /// ids were computed after the item's real left text; otherwise after the
  /// anchor ".", which is exact only when lead is not empty.
  bool exact = false;
};

/// A finished prompt.
struct Assembled {
  std::vector<int> prompt;
  std::string text;
  std::vector<int> answer;
  int context_begin = 0, context_end = 0;
  std::vector<std::pair<int, int>> needle_tokens;  ///< [begin, end) per needle index
  std::vector<int> needle_haystack_before;  ///< haystack tokens before each needle
  int haystack_tokens = 0;                  ///< tokens of all haystack units
  std::size_t total() const noexcept { return prompt.size() + answer.size(); }
};

class PromptBuilder {
 public:
  PromptBuilder(const SegmentEncoder& encoder, Layout layout, std::vector<std::string> needles);

  /// Tokens of everything but the haystack units, as estimated before assembly.
  int fixed_tokens() const noexcept { return fixed_; }

  /// Adds units from `source` while fixed + haystack <= limit, cutting the last
  /// one at a word when the layout allows; then places the needles at the unit
  /// boundaries nearest to depth x haystack tokens (needles sorted by depth,
  /// stable), assembles, and shortens the haystack from its end until
  /// prompt + answer <= limit. Throws bosch::invalid_argument when the fixed
  /// parts alone exceed the limit.
  Assembled build(UnitSource& source, const std::vector<double>& depths, int limit);

  /// The items of the last build, in prompt order.
  const std::vector<Item>& items() const noexcept { return items_; }

 private:
  Assembled assemble();
  std::string lead_of(std::size_t i) const;
  /// Cuts units_[k] to its longest word prefix whose tokens (with `lead`) are
  /// <= max_tokens; false when not even one word fits or it is not cuttable.
  bool cut(Item& item, const std::string& lead, int max_tokens) const;

  const SegmentEncoder& enc_;
  Layout layout_;
  std::vector<std::string> needles_;
  std::vector<std::vector<int>> needle_ids_;
  int fixed_ = 0;
  std::vector<Item> items_;
};

}  // namespace bosch::tasks::detail
