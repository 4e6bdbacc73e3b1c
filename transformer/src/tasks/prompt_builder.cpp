// SPDX-License-Identifier: Apache-2.0
// Token-exact prompt assembly (see generate.hpp for the method).
#include "prompt_builder.hpp"

#include <bosch/error.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bosch::tasks::detail {

PromptBuilder::PromptBuilder(const SegmentEncoder& encoder, Layout layout,
                             std::vector<std::string> needles)
    : enc_(encoder), layout_(std::move(layout)), needles_(std::move(needles)) {
  for (const auto& n : needles_) needle_ids_.push_back(enc_.unit(layout_.needle_sep + n));
  const Assembled bare = assemble();
  fixed_ = static_cast<int>(bare.total());
  for (const auto& ids : needle_ids_) fixed_ += static_cast<int>(ids.size());
}

std::string PromptBuilder::lead_of(std::size_t i) const {
  if (i == 0) return {};
  if (items_[i].needle >= 0 || items_[i - 1].needle >= 0) return layout_.needle_sep;
  return layout_.unit_sep;
}

bool PromptBuilder::cut(Item& item, const std::string& lead, int max_tokens) const {
  if (!layout_.truncatable || max_tokens <= 0) return false;
  const std::string& t = item.unit.text;
  std::vector<std::size_t> ends;  // end of each word but the last
  for (std::size_t p = t.find(' '); p != std::string::npos; p = t.find(' ', p + 1)) ends.push_back(p);
  if (ends.empty()) return false;
  int lo = 1, hi = static_cast<int>(ends.size()), best = 0;
  std::vector<int> best_ids;
  while (lo <= hi) {
    const int mid = lo + (hi - lo) / 2;
    std::vector<int> ids = enc_.unit(lead + t.substr(0, ends[static_cast<std::size_t>(mid - 1)]));
    if (static_cast<int>(ids.size()) <= max_tokens) {
      best = mid;
      best_ids = std::move(ids);
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (best == 0) return false;
  item.unit.text = t.substr(0, ends[static_cast<std::size_t>(best - 1)]);
  item.ids = std::move(best_ids);
  item.lead = lead;
  item.exact = !lead.empty();
  return true;
}

Assembled PromptBuilder::assemble() {
  Assembled a;
  std::string& text = a.text;
  const TextCodec& codec = enc_.codec();
  if (codec.add_bos && codec.bos >= 0) a.prompt.push_back(codec.bos);
  auto append = [&](const std::vector<int>& ids) {
    a.prompt.insert(a.prompt.end(), ids.begin(), ids.end());
  };
  auto put = [&](const std::string& seg, bool special) {
    if (seg.empty()) return;
    append(text.empty() ? enc_.first(seg, special) : enc_.after(text, seg, special));
    text += seg;
  };
  put(layout_.prefix, true);
  put(layout_.header, false);
  a.context_begin = static_cast<int>(a.prompt.size());
  a.needle_tokens.assign(needles_.size(), {0, 0});
  a.needle_haystack_before.assign(needles_.size(), 0);
  for (std::size_t i = 0; i < items_.size(); ++i) {
    Item& it = items_[i];
    const std::string lead = lead_of(i);
    if (it.lead != lead || (lead.empty() && !it.exact)) {
      const std::string seg = lead + it.unit.text;
      it.ids = text.empty() ? enc_.first(seg, false) : enc_.after(text, seg, false);
      it.lead = lead;
      it.exact = true;
    }
    const int begin = static_cast<int>(a.prompt.size());
    append(it.ids);
    text += lead;
    text += it.unit.text;
    if (it.needle >= 0) {
      const auto j = static_cast<std::size_t>(it.needle);
      a.needle_tokens[j] = {begin, static_cast<int>(a.prompt.size())};
      a.needle_haystack_before[j] = a.haystack_tokens;
    } else {
      a.haystack_tokens += static_cast<int>(it.ids.size());
    }
  }
  a.context_end = static_cast<int>(a.prompt.size());
  put(layout_.question, false);
  put(layout_.suffix, true);
  put(layout_.answer_prefix, false);
  a.answer = text.empty() ? enc_.first(layout_.answer, false)
                          : enc_.after(text, layout_.answer, false);
  return a;
}

Assembled PromptBuilder::build(UnitSource& source, const std::vector<double>& depths, int limit) {
  items_.clear();
  if (fixed_ > limit)
    throw invalid_argument("context length " + std::to_string(limit) +
                               " is too small: the task's fixed text alone needs " +
                               std::to_string(fixed_) + " tokens",
                           "context_length");
  // 1. Haystack units up to the budget.
  const int budget = limit - fixed_;
  std::vector<Item> units;
  int used = 0;
  while (used < budget) {
    Item it;
    it.unit = source.next();
    it.lead = layout_.unit_sep;
    it.ids = enc_.unit(layout_.unit_sep + it.unit.text);
    it.exact = !it.lead.empty();
    const int n = static_cast<int>(it.ids.size());
    if (n > 0 && used + n <= budget) {
      used += n;
      units.push_back(std::move(it));
      continue;
    }
    if (n > 0 && cut(it, layout_.unit_sep, budget - used)) {
      used += static_cast<int>(it.ids.size());
      units.push_back(std::move(it));
    }
    break;
  }
  // 2. Needles at the unit boundary nearest to depth x haystack tokens.
  std::vector<int> cum(units.size() + 1, 0);
  for (std::size_t k = 0; k < units.size(); ++k)
    cum[k + 1] = cum[k] + static_cast<int>(units[k].ids.size());
  std::vector<std::size_t> order(needles_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return depths[x] < depths[y]; });
  std::vector<std::vector<std::size_t>> at(units.size() + 1);
  for (std::size_t j : order) {
    const double target = depths[j] * cum.back();
    std::size_t best = 0;
    for (std::size_t k = 1; k < cum.size(); ++k)
      if (std::abs(cum[k] - target) < std::abs(cum[best] - target)) best = k;
    at[best].push_back(j);
  }
  for (std::size_t k = 0; k <= units.size(); ++k) {
    for (std::size_t j : at[k]) {
      Item n;
      n.unit.text = needles_[j];
      n.needle = static_cast<int>(j);
      n.lead = layout_.needle_sep;
      n.ids = needle_ids_[j];
      n.exact = !n.lead.empty();
      items_.push_back(std::move(n));
    }
    if (k < units.size()) items_.push_back(std::move(units[k]));
  }
  // 3. Assemble; shorten the haystack from its end while separators made it too long.
  Assembled a = assemble();
  while (a.total() > static_cast<std::size_t>(limit)) {
    const int over = static_cast<int>(a.total()) - limit;
    auto last = std::find_if(items_.rbegin(), items_.rend(),
                             [](const Item& it) { return it.needle < 0; });
    if (last == items_.rend())
      throw invalid_argument("context length " + std::to_string(limit) +
                                 " is too small for the task's fixed text and needles",
                             "context_length");
    Item& it = *last;
    const int keep = static_cast<int>(it.ids.size()) - over;
    if (!cut(it, it.lead, keep)) items_.erase(std::next(last).base());
    a = assemble();
  }
  return a;
}

}  // namespace bosch::tasks::detail
