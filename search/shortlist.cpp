#include "search/shortlist.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "calibration/metrics.hpp"

namespace lmsim::search {

namespace m = lmsim::metrics;

namespace {
template <class F>
std::vector<double> column(const std::vector<PairedConfig>& c, F f) {
  std::vector<double> v;
  for (const auto& x : c) v.push_back(f(x));
  return v;
}
// Indices of the k best by score, ties broken by configuration name.
template <class C>
std::vector<std::size_t> best_k(const std::vector<C>& c, const std::vector<double>& score, std::size_t k) {
  std::vector<std::size_t> idx(c.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return score[a] != score[b] ? score[a] < score[b] : c[a].config < c[b].config;
  });
  idx.resize(std::min(k, idx.size()));
  return idx;
}
// The combined rule's score: the mean of each configuration's rank by the two times.
std::vector<double> mean_ranks(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = m::average_ranks(a), rb = m::average_ranks(b);
  std::vector<double> out(ra.size());
  for (std::size_t i = 0; i < ra.size(); ++i) out[i] = (ra[i] + rb[i]) / 2;
  return out;
}
double regret(const std::vector<PairedConfig>& c, const std::vector<std::size_t>& chosen) {
  double best_all = 1e300, best_in = 1e300;
  for (const auto& x : c) best_all = std::min(best_all, x.target_time_s);
  for (auto i : chosen) best_in = std::min(best_in, c[i].target_time_s);
  return 100.0 * (best_in / best_all - 1.0);
}
}  // namespace

ShortlistReport shortlist(const std::vector<PairedConfig>& c, std::size_t k, const std::string& source,
                          const std::string& target) {
  ShortlistReport r;
  r.candidates = c.size();
  r.k = k;
  const auto tgt = column(c, [](const PairedConfig& x) { return x.target_time_s; });
  r.target_optimum = c[best_k(c, tgt, 1)[0]].config;
  auto add = [&](const std::string& name, const std::vector<double>& score) {
    const auto top = best_k(c, score, k);
    ShortlistRule rule;
    rule.name = name;
    for (auto i : top) rule.shortlist.push_back(c[i].config);
    rule.contains_target_optimum =
        std::find(rule.shortlist.begin(), rule.shortlist.end(), r.target_optimum) != rule.shortlist.end();
    rule.top1_regret_pct = regret(c, best_k(c, score, 1));
    rule.topk_regret_pct = regret(c, top);
    r.rules.push_back(rule);
  };
  const auto src = column(c, [](const PairedConfig& x) { return x.source_time_s; });
  add(source + " measured top-" + std::to_string(k), src);
  const bool has_src_pred =
      std::all_of(c.begin(), c.end(), [](const auto& x) { return x.source_predicted_time_s > 0; });
  const bool has_tgt_pred =
      std::all_of(c.begin(), c.end(), [](const auto& x) { return x.target_predicted_time_s > 0; });
  if (has_src_pred)
    add(source + " predicted top-" + std::to_string(k),
        column(c, [](const auto& x) { return x.source_predicted_time_s; }));
  if (has_tgt_pred) {
    const auto tp = column(c, [](const auto& x) { return x.target_predicted_time_s; });
    add(target + " predicted top-" + std::to_string(k), tp);
    add("combined (" + source + " measured rank + " + target + " predicted rank) top-" + std::to_string(k),
        mean_ranks(src, tp));
  }
  return r;
}

Proposal propose(const std::vector<ProposalConfig>& all, std::size_t k, const std::string& source,
                 const std::string& target) {
  Proposal r{all.size(), 0, k, {}};
  std::vector<ProposalConfig> c;
  for (const auto& x : all)
    if (x.target_fits) c.push_back(x);
  r.fitting = c.size();
  if (c.empty()) return r;
  const std::string top = " top-" + std::to_string(k);
  auto add = [&](const std::string& name, const std::vector<double>& score) {
    ShortlistRule rule{name, {}, false, std::nan(""), std::nan("")};
    for (auto i : best_k(c, score, k)) rule.shortlist.push_back(c[i].config);
    r.rules.push_back(rule);
  };
  std::vector<double> src, tp;
  for (const auto& x : c) {
    src.push_back(x.source_time_s);
    tp.push_back(x.target_predicted_time_s);
  }
  add(source + " measured" + top, src);
  add(target + " predicted" + top, tp);
  add("combined (" + source + " measured rank + " + target + " predicted rank)" + top, mean_ranks(src, tp));
  return r;
}

CrossPlatformReport cross_platform(const std::vector<PairedConfig>& c) {
  CrossPlatformReport r{};
  for (const char* stratum : {"all", "noRC", "RC"}) {
    std::vector<PairedConfig> s;
    for (const auto& x : c)
      if (std::string(stratum) == "all" || (std::string(stratum) == "RC") == x.recompute) s.push_back(x);
    StratumCorrelation sc{stratum, s.size(), 0, 0, 0, 0};
    const auto st = column(s, [](const auto& x) { return x.source_time_s; });
    const auto tt = column(s, [](const auto& x) { return x.target_time_s; });
    const auto sm = column(s, [](const auto& x) { return x.source_memory_bytes; });
    const auto tm = column(s, [](const auto& x) { return x.target_memory_bytes; });
    sc.time_spearman = m::spearman(st, tt);
    sc.time_kendall = m::kendall_tau_b(st, tt);
    sc.memory_spearman = m::spearman(sm, tm);
    sc.memory_kendall = m::kendall_tau_b(sm, tm);
    r.strata.push_back(sc);
  }
  const auto st = column(c, [](const auto& x) { return x.source_time_s; });
  const auto tt = column(c, [](const auto& x) { return x.target_time_s; });
  const auto sm = column(c, [](const auto& x) { return x.source_memory_bytes; });
  const auto tm = column(c, [](const auto& x) { return x.target_memory_bytes; });
  {
    const auto a = best_k(c, sm, 3), b = best_k(c, tm, 3);
    std::set<std::size_t> sb(b.begin(), b.end());
    for (auto i : a) r.lowest_memory_top3_overlap += sb.count(i);
  }
  // RC/noRC pairs: the same degrees with and without recomputation.
  std::map<std::string, std::pair<int, int>> pairs;  // base name -> (noRC index, RC index)
  for (std::size_t i = 0; i < c.size(); ++i) {
    const std::string& n = c[i].config;
    const auto cut = n.rfind('-');
    auto& p = pairs.try_emplace(n.substr(0, cut), -1, -1).first->second;
    (c[i].recompute ? p.second : p.first) = static_cast<int>(i);
  }
  std::vector<double> s_over, t_over, s_save, t_save;
  for (const auto& [base, p] : pairs) {
    if (p.first < 0 || p.second < 0) continue;
    const PairedConfig& no = c[static_cast<std::size_t>(p.first)];
    const PairedConfig& rc = c[static_cast<std::size_t>(p.second)];
    ++r.rc_pairs;
    const bool time_agree = (rc.source_time_s > no.source_time_s) == (rc.target_time_s > no.target_time_s);
    const bool mem_agree =
        (rc.source_memory_bytes < no.source_memory_bytes) == (rc.target_memory_bytes < no.target_memory_bytes);
    r.rc_direction_agreements += (time_agree && mem_agree) ? 1 : 0;
    s_over.push_back(100 * (rc.source_time_s / no.source_time_s - 1));
    t_over.push_back(100 * (rc.target_time_s / no.target_time_s - 1));
    s_save.push_back(100 * (1 - rc.source_memory_bytes / no.source_memory_bytes));
    t_save.push_back(100 * (1 - rc.target_memory_bytes / no.target_memory_bytes));
  }
  r.source_recompute_time_overhead_pct = m::median(s_over);
  r.target_recompute_time_overhead_pct = m::median(t_over);
  r.source_recompute_memory_saving_pct = m::median(s_save);
  r.target_recompute_memory_saving_pct = m::median(t_save);
  std::vector<double> tr, mr;
  for (std::size_t i = 0; i < c.size(); ++i) {
    tr.push_back(tt[i] / st[i]);
    mr.push_back(tm[i] / sm[i]);
  }
  r.median_time_ratio = m::median(tr);
  r.median_memory_ratio = m::median(mr);
  // Leave-one-configuration-out transfer: target ≈ source × median ratio of the other configurations.
  std::vector<double> pt, pm;
  for (std::size_t i = 0; i < c.size(); ++i) {
    std::vector<double> rt, rm;
    for (std::size_t j = 0; j < c.size(); ++j)
      if (j != i) {
        rt.push_back(tr[j]);
        rm.push_back(mr[j]);
      }
    pt.push_back(st[i] * m::median(rt));
    pm.push_back(sm[i] * m::median(rm));
  }
  r.transfer_time_smape_pct = m::smape_pct(pt, tt);
  r.transfer_time_r2 = m::r2(pt, tt);
  r.transfer_memory_smape_pct = m::smape_pct(pm, tm);
  r.transfer_memory_r2 = m::r2(pm, tm);
  r.source_top1_regret_pct = regret(c, best_k(c, st, 1));
  r.source_top3_regret_pct = regret(c, best_k(c, st, 3));
  return r;
}

}  // namespace lmsim::search
