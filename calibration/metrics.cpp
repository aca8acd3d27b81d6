#include "calibration/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace lmsim::metrics {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = a.size();
  if (n < 2 || b.size() != n) return kNaN;
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n, mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa <= 0 || sbb <= 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}
}  // namespace

double mae(const std::vector<double>& p, const std::vector<double>& m) {
  if (p.empty()) return kNaN;
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i) s += std::fabs(p[i] - m[i]);
  return s / p.size();
}

double smape_pct(const std::vector<double>& p, const std::vector<double>& m, double eps) {
  if (p.empty()) return kNaN;
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    s += std::fabs(p[i] - m[i]) / ((std::fabs(p[i]) + std::fabs(m[i])) / 2 + eps);
  return 100.0 * s / p.size();
}

double mape_pct(const std::vector<double>& p, const std::vector<double>& m) {
  if (p.empty()) return kNaN;
  double s = 0;
  for (std::size_t i = 0; i < p.size(); ++i) s += std::fabs(p[i] - m[i]) / std::fabs(m[i]);
  return 100.0 * s / p.size();
}

double r2(const std::vector<double>& p, const std::vector<double>& m) {
  if (p.size() < 2) return kNaN;
  const double mean = std::accumulate(m.begin(), m.end(), 0.0) / m.size();
  double res = 0, tot = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    res += (m[i] - p[i]) * (m[i] - p[i]);
    tot += (m[i] - mean) * (m[i] - mean);
  }
  if (tot <= 0) return kNaN;
  return 1.0 - res / tot;
}

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  return pearson(average_ranks(a), average_ranks(b));
}

double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  const std::size_t n = a.size();
  if (n < 2 || b.size() != n) return kNaN;
  double conc = 0, disc = 0, ties_a = 0, ties_b = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;  // tied in both: excluded from both n1 and n2 terms
      if (da == 0) {
        ties_a += 1;
      } else if (db == 0) {
        ties_b += 1;
      } else if ((da > 0) == (db > 0)) {
        conc += 1;
      } else {
        disc += 1;
      }
    }
  const double denom = std::sqrt((conc + disc + ties_a) * (conc + disc + ties_b));
  if (denom <= 0) return kNaN;
  return (conc - disc) / denom;
}

std::vector<std::size_t> top_k(const std::vector<double>& score, std::size_t k) {
  std::vector<std::size_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return score[a] < score[b]; });
  idx.resize(std::min(k, idx.size()));
  return idx;
}

double top1_hit(const std::vector<double>& pred, const std::vector<double>& meas) {
  if (pred.empty()) return kNaN;
  const std::size_t best = top_k(pred, 1)[0];
  return meas[best] == *std::min_element(meas.begin(), meas.end()) ? 1.0 : 0.0;
}

std::size_t top_k_overlap(const std::vector<double>& a, const std::vector<double>& b, std::size_t k) {
  const auto ta = top_k(a, k), tb = top_k(b, k);
  const std::set<std::size_t> sb(tb.begin(), tb.end());
  std::size_t n = 0;
  for (auto i : ta) n += sb.count(i);
  return n;
}

double regret_at_k_pct(const std::vector<double>& score, const std::vector<double>& meas, std::size_t k) {
  if (score.empty() || k == 0) return kNaN;
  double best_in = std::numeric_limits<double>::infinity();
  for (auto i : top_k(score, k)) best_in = std::min(best_in, meas[i]);
  return 100.0 * (best_in / *std::min_element(meas.begin(), meas.end()) - 1.0);
}

double feasible_retention(const std::vector<bool>& pred, const std::vector<bool>& meas) {
  double feas = 0, kept = 0;
  for (std::size_t i = 0; i < meas.size(); ++i)
    if (meas[i]) {
      feas += 1;
      kept += pred[i] ? 1 : 0;
    }
  return feas > 0 ? kept / feas : kNaN;
}

double feasible_agreement(const std::vector<bool>& pred, const std::vector<bool>& meas) {
  if (meas.empty()) return kNaN;
  double agree = 0;
  for (std::size_t i = 0; i < meas.size(); ++i) agree += pred[i] == meas[i] ? 1 : 0;
  return agree / meas.size();
}

double jensen_shannon(const std::map<std::string, double>& p, const std::map<std::string, double>& q) {
  std::set<std::string> keys;
  double sp = 0, sq = 0;
  for (const auto& [k, v] : p) {
    keys.insert(k);
    sp += v;
  }
  for (const auto& [k, v] : q) {
    keys.insert(k);
    sq += v;
  }
  if (sp <= 0 || sq <= 0) return kNaN;
  auto get = [](const std::map<std::string, double>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  double js = 0;
  for (const auto& k : keys) {
    const double a = get(p, k) / sp, b = get(q, k) / sq, mid = (a + b) / 2;
    if (a > 0) js += 0.5 * a * std::log2(a / mid);
    if (b > 0) js += 0.5 * b * std::log2(b / mid);
  }
  return js;
}

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace lmsim::metrics
