// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/solver_penalized.hpp
/// The penalized bit-flip (1+lambda) evolution with repair, the analogue of
/// the paper's loss (see solvers.hpp).

#include <bosch/search/solver_common.hpp>

namespace bosch::search {

/// Penalized bit-flip (1+lambda) evolution with repair (see the file comment).
template <class O>
SubResult solve_penalized(O& obj, const SubProblem& p, const Options& o) {
  const std::size_t e0 = obj.evaluations();
  engine g(p.stream);
  std::vector<std::pair<std::vector<std::uint8_t>, double>> history;
  detail::best_tracker best;  // feasible, by score
  const std::size_t n = p.units.size();
  const std::vector<std::uint8_t> start = unit_state(p, p.start);
  std::vector<int> targets, sizes;
  for (const auto& grp : p.groups) {
    targets.push_back(grp.count);
    sizes.push_back(static_cast<int>(grp.units.size()));
  }
  const double total_bits = static_cast<double>(p.start.size());
  auto loss = [&](const std::vector<std::uint8_t>& s, double score) {
    double pen;
    if (o.penalty_scope == PenaltyScope::per_layer) {
      const auto c = group_counts(p, s);
      pen = per_layer_penalty(o.alpha, c, targets, sizes);
    } else {
      double delta = 0.0;
      for (std::size_t u = 0; u < n; ++u)
        delta += (static_cast<double>(s[u]) - static_cast<double>(start[u])) *
                 static_cast<double>(p.units[u].size());
      pen = o.alpha * (delta / total_bits) * (delta / total_bits);
    }
    return -obj.normalized(score) + pen;
  };
  auto note = [&](const std::vector<std::uint8_t>& s, double v) {
    history.emplace_back(s, v);
    if (feasible(p, s)) best.offer(s, v);
  };

  std::vector<std::uint8_t> parent = start;
  HeadMask parent_mask = p.start;
  std::optional<double> ps;
  if (obj.known(p.start) || detail::allowance(obj, p, e0, 1) > 0)
    ps = obj.evaluate(p.start, p.reference);
  if (!ps) return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
  note(parent, *ps);
  double parent_loss = loss(parent, *ps);
  std::vector<std::uint8_t> best_l = parent;
  double best_loss = parent_loss;

  const double rate = o.mutation_rate > 0.0 ? o.mutation_rate : 1.0 / static_cast<double>(n);
  auto mutate = [&](std::vector<std::uint8_t>& s, double r) {
    bool flipped = false;
    for (std::size_t u = 0; u < n; ++u)
      if (uniform01(g) < r) {
        s[u] ^= 1;
        flipped = true;
      }
    if (!flipped) s[static_cast<std::size_t>(uniform_int(g, 0, static_cast<int>(n) - 1))] ^= 1;
  };

  int stagnation = 0, idle = 0;
  while (!obj.stopped()) {
    // Hold one evaluation back for the repair.
    const std::size_t nprop = detail::allowance(obj, p, e0, static_cast<std::size_t>(o.lambda), 1);
    if (nprop == 0) break;
    std::vector<std::vector<std::uint8_t>> props;
    std::vector<HeadMask> masks;
    for (std::size_t j = 0; j < nprop; ++j)
      for (int attempt = 0; attempt < 16; ++attempt) {
        auto child = parent;
        mutate(child, rate * (1 + idle));
        HeadMask cm = apply_state(p, child);
        if (obj.known(cm) || std::find(masks.begin(), masks.end(), cm) != masks.end()) continue;
        props.push_back(std::move(child));
        masks.push_back(std::move(cm));
        break;
      }
    if (props.empty()) {
      if (++idle > 32) break;
      continue;
    }
    idle = 0;
    const auto scores = obj.evaluate_many(masks, &parent_mask);
    std::optional<std::size_t> pick;
    double pick_loss = 0.0;
    for (std::size_t j = 0; j < props.size(); ++j) {
      if (!scores[j]) continue;
      note(props[j], *scores[j]);
      const double l = loss(props[j], *scores[j]);
      if (!pick || l < pick_loss) {
        pick = j;
        pick_loss = l;
      }
    }
    if (!pick) break;
    if (pick_loss < parent_loss || (o.accept_equal && pick_loss == parent_loss)) {
      parent = props[*pick];
      parent_mask = masks[*pick];
      parent_loss = pick_loss;
    }
    if (pick_loss < best_loss) {
      best_l = props[*pick];
      best_loss = pick_loss;
      stagnation = 0;
    } else if (++stagnation >= o.restart_after) {
      if (detail::allowance(obj, p, e0, 1, 1) == 0) break;
      stagnation = 0;
      parent = best_l;
      parent_mask = apply_state(p, parent);
      parent_loss = best_loss;
      mutate(parent, std::min(0.5, 4.0 * rate));
      HeadMask rm = apply_state(p, parent);
      if (obj.known(rm)) {
        parent_loss = loss(parent, *obj.cached(rm));
        parent_mask = std::move(rm);
      } else {
        auto v = obj.evaluate(rm, &parent_mask);
        if (!v) break;
        note(parent, *v);
        parent_loss = loss(parent, *v);
        parent_mask = std::move(rm);
        if (parent_loss < best_loss) {
          best_l = parent;
          best_loss = parent_loss;
        }
      }
    }
  }

  // Repair the best-L point to exact counts using marginal estimates.
  if (!feasible(p, best_l) && !obj.stopped()) {
    std::vector<double> sum_on(n, 0.0), sum_off(n, 0.0);
    std::vector<int> n_on(n, 0), n_off(n, 0);
    for (const auto& [s, v] : history)
      for (std::size_t u = 0; u < n; ++u) {
        if (s[u]) {
          sum_on[u] += obj.normalized(v);
          ++n_on[u];
        } else {
          sum_off[u] += obj.normalized(v);
          ++n_off[u];
        }
      }
    std::vector<double> est(n, 0.0);
    for (std::size_t u = 0; u < n; ++u)
      if (n_on[u] > 0 && n_off[u] > 0) est[u] = sum_on[u] / n_on[u] - sum_off[u] / n_off[u];
    auto repaired = best_l;
    for (const auto& grp : p.groups) {
      std::vector<int> on, off;
      for (int u : grp.units) (repaired[static_cast<std::size_t>(u)] ? on : off).push_back(u);
      auto by_est = [&](int a, int b) {
        const double ea = est[static_cast<std::size_t>(a)], eb = est[static_cast<std::size_t>(b)];
        return ea != eb ? ea < eb : a < b;
      };
      if (static_cast<int>(on.size()) > grp.count) {
        std::stable_sort(on.begin(), on.end(), by_est);  // lowest estimate first: switch off
        for (std::size_t i = 0; i < on.size() - static_cast<std::size_t>(grp.count); ++i)
          repaired[static_cast<std::size_t>(on[i])] = 0;
      } else if (static_cast<int>(on.size()) < grp.count) {
        std::stable_sort(off.begin(), off.end(), [&](int a, int b) {
          const double ea = est[static_cast<std::size_t>(a)], eb = est[static_cast<std::size_t>(b)];
          return ea != eb ? ea > eb : a < b;
        });  // highest estimate first: switch on
        for (std::size_t i = 0; i < static_cast<std::size_t>(grp.count) - on.size(); ++i)
          repaired[static_cast<std::size_t>(off[i])] = 1;
      }
    }
    HeadMask rm = apply_state(p, repaired);
    std::optional<double> v;
    if (obj.known(rm) || detail::allowance(obj, p, e0, 1) > 0) v = obj.evaluate(rm, &parent_mask);
    if (v) note(repaired, *v);
  }
  return detail::finish(p, best, obj.evaluations() - e0, std::move(history));
}

}  // namespace bosch::search
