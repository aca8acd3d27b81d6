#include "calibration/uncertainty.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/error.hpp"

namespace lmsim::calib {

namespace {

// Central-difference step of a parameter, kept inside its bounds: 1/1000 of its range, or `half_width`.
struct Step {
  PlatformParams lo, hi;
  double width;
};
Step step(const PlatformParams& theta, std::size_t i, double half_width = 0) {
  const ParamInfo& info = param_table()[i];
  const double h = half_width > 0 ? half_width : 1e-3 * (info.upper - info.lower), v = get(theta, i);
  Step s{theta, theta, 0};
  set(s.lo, i, std::max(info.lower, v - h));
  set(s.hi, i, std::min(info.upper, v + h));
  s.width = get(s.hi, i) - get(s.lo, i);
  return s;
}

// Inverts a symmetric positive-definite k x k matrix (Gauss-Jordan with partial pivoting); a ridge keeps
// parameters the data cannot see from making it singular.
std::vector<double> invert(std::vector<double> a, std::size_t k) {
  std::vector<double> inv(k * k, 0.0);
  for (std::size_t i = 0; i < k; ++i) inv[i * k + i] = 1;
  for (std::size_t i = 0; i < k; ++i) a[i * k + i] += 1e-12 * (1 + std::fabs(a[i * k + i]));
  for (std::size_t c = 0; c < k; ++c) {
    std::size_t piv = c;
    for (std::size_t r = c + 1; r < k; ++r)
      if (std::fabs(a[r * k + c]) > std::fabs(a[piv * k + c])) piv = r;
    for (std::size_t j = 0; j < k; ++j) {
      std::swap(a[c * k + j], a[piv * k + j]);
      std::swap(inv[c * k + j], inv[piv * k + j]);
    }
    const double d = a[c * k + c];
    for (std::size_t j = 0; j < k; ++j) {
      a[c * k + j] /= d;
      inv[c * k + j] /= d;
    }
    for (std::size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double f = a[r * k + c];
      for (std::size_t j = 0; j < k; ++j) {
        a[r * k + j] -= f * a[c * k + j];
        inv[r * k + j] -= f * inv[c * k + j];
      }
    }
  }
  return inv;
}

double log_or_nan(double v) { return v > 0 && std::isfinite(v) ? std::log(v) : std::nan(""); }

// What the fit never saw keeps its prior. A parameter the data could not identify (choose_free left it out: flash
// attention's efficiency without flash runs, FP8's without FP8 runs, the inter-node link's without a group that
// crosses a node, DP overlap without overlapped DP traffic, memory's without memory measurements) or that `--free`
// left out joins `free` at the end with the prior's variance (σ from param_table(), uncorrelated), unless the user
// fixed it (known, not merely unfitted). A prediction that leans on it then carries that prior's width: a search
// that ranks flash-attention layouts on a θ fitted without them is told how little is known of their speed.
// Without memory measurements the memory residual scale is the per-run error the objective states (its prior
// weight, ~3 %) at normal quantiles.
void keep_unfitted_priors(Uncertainty& u, const std::vector<std::size_t>& fixed, double stated_sd) {
  const std::size_t k = u.free.size();
  std::vector<std::size_t> add;
  for (std::size_t i = 0; i < kNumParams; ++i)
    if (std::find(u.free.begin(), u.free.end(), i) == u.free.end() &&
        std::find(fixed.begin(), fixed.end(), i) == fixed.end())
      add.push_back(i);
  const std::size_t n = k + add.size();
  std::vector<double> cov(n * n, 0.0);
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = 0; b < k; ++b) cov[a * n + b] = u.covariance[a * k + b];
  for (std::size_t a = 0; a < add.size(); ++a) {
    const double sd = param_table()[add[a]].prior_sd;
    cov[(k + a) * n + k + a] = sd * sd;
    u.free.push_back(add[a]);
  }
  u.covariance = std::move(cov);
  u.n_prior_only = add.size();
  if (u.n_memory == 0) {
    u.memory_log_sd = stated_sd;
    u.memory_dof = 0;
  }
}

}  // namespace

Uncertainty prior_uncertainty(double stated_sd) {
  Uncertainty u;
  keep_unfitted_priors(u, {}, stated_sd);
  u.time_log_sd = stated_sd;
  u.time_dof = 0;
  return u;
}

Uncertainty laplace(const Problem& pb, const std::vector<std::size_t>& train, const PlatformParams& theta) {
  Uncertainty u;
  u.free = pb.free;
  const std::size_t k = u.free.size();
  const SimOptions so = sim_options(pb);
  // Residuals at the optimum, per kind (their scale is set below, once the parameters that move each kind are known).
  // Each time run's weight in the Gauss-Newton Hessian (below), in the order of the Jacobian's rows: the pseudo-Huber
  // loss's curvature at its residual, so the Hessian is the one of the objective actually minimised (a run the fit
  // treats as an outlier tells little about θ).
  double st = 0, sm = 0;
  std::vector<double> time_weight;
  for (auto i : train) {
    const Sample& s = pb.samples[i];
    const Prediction p = simulate(s.model, s.strategy, pb.system, s.settings, theta, so);
    if (s.time_s > 0) {
      const double e = p.ok() ? std::log(p.iteration_time_s / s.time_s) : 0;
      time_weight.push_back(std::sqrt(robust_curvature(e * e, pb.weights.prior)));
    }
    if (!p.ok()) continue;
    if (s.time_s > 0) {
      st += std::pow(std::log(p.iteration_time_s / s.time_s), 2);
      ++u.n_time;
    }
    if (s.mem_max_bytes > 0) {
      sm += std::pow(std::log(p.max_peak_memory_bytes / s.mem_max_bytes), 2);
      ++u.n_memory;
    }
  }
  // Unbiased per-kind variances: each kind's runs less the free parameters that move that kind's predictions
  // (most θ move time only, the runtime-memory terms memory only).
  // With no more runs than parameters the residual scale is not estimable (the fit passes through the runs): the
  // objective's stated per-run error scale (sqrt of its prior weight, ~3 %) stands in. A stated scale is not an
  // estimate, so it takes normal quantiles, as the uncalibrated presets' prior intervals do (their stated scale and
  // priors held 69 and 73 of the 77 calibration runs at 80 / 90 %); Student's t at one degree of freedom put a
  // B200 θ fitted on two runs at 6.3 sds for its 90 % band, wider than no fit at all. Where the runs' own
  // residuals exceed it, they stand, at one degree of freedom.
  const double stated_sd = std::sqrt(std::max(0.0, pb.weights.prior));
  auto one_kind = [&](double ss, std::size_t n, double k_kind, double& sd, double& dof) {
    const double free_dof = static_cast<double>(n) - k_kind;
    dof = std::max(1.0, free_dof);
    sd = n ? std::sqrt(ss / dof) : 0;
    if (n && free_dof < 1 && sd <= stated_sd) {
      sd = stated_sd;
      dof = 0;
    }
  };
  auto set_scale = [&](double k_time, double k_memory) {
    one_kind(st, u.n_time, k_time, u.time_log_sd, u.time_dof);
    one_kind(sm, u.n_memory, k_memory, u.memory_log_sd, u.memory_dof);
  };
  if (k == 0) {
    set_scale(0, 0);
    keep_unfitted_priors(u, pb.fixed, stated_sd);
    return u;
  }
  // Gauss-Newton information: Σ over runs of (∂ log prediction / ∂θ)² / s², plus the prior's precision.
  std::vector<std::vector<double>> jt(k), jm(k);
  for (std::size_t a = 0; a < k; ++a) {
    const Step sp = step(theta, u.free[a]);
    for (auto i : train) {
      const Sample& s = pb.samples[i];
      const Prediction lo = simulate(s.model, s.strategy, pb.system, s.settings, sp.lo, so);
      const Prediction hi = simulate(s.model, s.strategy, pb.system, s.settings, sp.hi, so);
      const bool ok = lo.ok() && hi.ok() && sp.width > 0;
      if (s.time_s > 0)
        jt[a].push_back(ok ? (log_or_nan(hi.iteration_time_s) - log_or_nan(lo.iteration_time_s)) / sp.width : 0);
      if (s.mem_max_bytes > 0)
        jm[a].push_back(ok ? (log_or_nan(hi.max_peak_memory_bytes) - log_or_nan(lo.max_peak_memory_bytes)) / sp.width
                           : 0);
    }
  }
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t r = 0; r < jt[a].size(); ++r) jt[a][r] *= time_weight[r];
  auto moves = [](const std::vector<double>& g) {
    for (double v : g)
      if (std::isfinite(v) && std::fabs(v) > 1e-12) return 1.0;
    return 0.0;
  };
  double k_time = 0, k_memory = 0;
  for (std::size_t a = 0; a < k; ++a) {
    k_time += moves(jt[a]);
    k_memory += moves(jm[a]);
  }
  // Σ = (Jᵀ J / s² + the prior's precision)⁻¹ at the current residual scales; the prior's precision is in the same
  // units (the objective's prior / n · z² against a mean squared log error, i.e. prior / s_t² per z²).
  auto covariance = [&]() {
    const double vt = std::max(u.time_log_sd * u.time_log_sd, 1e-8),
                 vm = std::max(u.memory_log_sd * u.memory_log_sd, 1e-8);
    std::vector<double> info(k * k, 0.0);
    for (std::size_t a = 0; a < k; ++a)
      for (std::size_t b = 0; b < k; ++b) {
        double x = 0;
        for (std::size_t r = 0; r < jt[a].size(); ++r)
          if (std::isfinite(jt[a][r]) && std::isfinite(jt[b][r])) x += jt[a][r] * jt[b][r] / vt;
        for (std::size_t r = 0; r < jm[a].size(); ++r)
          if (std::isfinite(jm[a][r]) && std::isfinite(jm[b][r])) x += jm[a][r] * jm[b][r] / vm;
        info[a * k + b] = x;
      }
    if (pb.weights.prior > 0)
      for (std::size_t a = 0; a < k; ++a) {
        const double sd = param_table()[u.free[a]].prior_sd;
        info[a * k + a] += pb.weights.prior / (vt * sd * sd);
      }
    return invert(info, k);
  };
  // The parameters a kind's fit used up: the trace of that kind's hat matrix, Σ_r j_rᵀ Σ j_r / s², the effective
  // number of parameters of a penalised fit (Hastie, Tibshirani & Friedman, The Elements of Statistical Learning,
  // §3.4.1 and §7.6). A parameter the runs pin counts as one; one the prior holds, as nearly none.
  auto hat_trace = [&](const std::vector<std::vector<double>>& j, double sd) {
    double tr = 0;
    const std::size_t rows = j.empty() ? 0 : j[0].size();
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t a = 0; a < k; ++a)
        for (std::size_t b = 0; b < k; ++b)
          if (std::isfinite(j[a][r]) && std::isfinite(j[b][r])) tr += j[a][r] * u.covariance[a * k + b] * j[b][r];
    return tr / std::max(sd * sd, 1e-8);
  };
  // From the count of parameters that move each kind, let scale and trace settle: they change each other only
  // through the prior's share, and a few rounds reach the fixed point.
  set_scale(k_time, k_memory);
  u.covariance = covariance();
  for (int round = 0; round < 4; ++round) {
    set_scale(std::min(k_time, hat_trace(jt, u.time_log_sd)), std::min(k_memory, hat_trace(jm, u.memory_log_sd)));
    u.covariance = covariance();
  }
  keep_unfitted_priors(u, pb.fixed, stated_sd);
  return u;
}

void set_unseen_scale(Uncertainty& u, const Problem& pb, CvKind kind, const CvResult& cv) {
  if (kind != CvKind::leave_one_model_out && kind != CvKind::leave_one_source_out) return;
  double st = 0, sm = 0;
  std::size_t nt = 0, nm = 0;
  for (const SamplePrediction& p : cv.out_of_sample) {
    const Sample& s = pb.samples[p.index];
    if (s.time_s > 0 && p.time_s > 0) {
      st += std::pow(std::log(p.time_s / s.time_s), 2);
      ++nt;
    }
    if (s.mem_max_bytes > 0 && p.mem_max_bytes > 0) {
      sm += std::pow(std::log(p.mem_max_bytes / s.mem_max_bytes), 2);
      ++nm;
    }
  }
  u.unseen_time_log_sd = nt ? std::sqrt(st / static_cast<double>(nt)) : 0;
  u.unseen_memory_log_sd = nm ? std::sqrt(sm / static_cast<double>(nm)) : 0;
  u.unseen_n_time = nt;
  u.unseen_n_memory = nm;
}

Uncertainty for_unseen_model(Uncertainty u) {
  // Held-out errors are not fitted, so none of their degrees of freedom went to the parameters.
  auto widen = [](double& sd, double& dof, double unseen_sd, std::size_t n) {
    if (n == 0 || !(unseen_sd > sd)) return;
    sd = unseen_sd;
    dof = static_cast<double>(n);
  };
  widen(u.time_log_sd, u.time_dof, u.unseen_time_log_sd, u.unseen_n_time);
  widen(u.memory_log_sd, u.memory_dof, u.unseen_memory_log_sd, u.unseen_n_memory);
  return u;
}

PredictionUncertainty for_model(const Uncertainty& u, bool model_fitted) {
  if (model_fitted) return {u, false, 0};
  return {for_unseen_model(u), u.unseen_n_time > 0, 0};
}

PredictionUncertainty for_prediction(const Uncertainty& u, bool model_fitted, const FittedRange& range, const Model& m,
                                     const Strategy& s, const TrainingSettings& t) {
  PredictionUncertainty p = for_model(u, model_fitted);
  p.beyond_range_log_sq = beyond_range_log_sq(range, m, s, t);
  p.u = beyond_range(p.u, p.beyond_range_log_sq);
  return p;
}

FittedRange fitted_range(const Problem& pb, const std::vector<std::size_t>& idx) {
  FittedRange out;
  for (const auto& d : kRangeDims) {
    double lo = INFINITY, hi = -INFINITY;
    for (auto i : idx) {
      const double v = d.of(pb.samples[i].model, pb.samples[i].strategy, pb.samples[i].settings);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (lo <= hi) out.push_back({d.name, {lo, hi}});
  }
  return out;
}

std::array<double, std::size(kRangeDims)> beyond_range_logs(const FittedRange& range, const Model& m, const Strategy& s,
                                                            const TrainingSettings& t) {
  std::array<double, std::size(kRangeDims)> out{};
  for (std::size_t k = 0; k < out.size(); ++k)
    for (const auto& [name, r] : range) {
      if (name != kRangeDims[k].name || !(r[0] > 0)) continue;
      const double v = kRangeDims[k].of(m, s, t);
      out[k] = v > r[1] ? std::log(v / r[1]) : v < r[0] ? -std::log(r[0] / v) : 0.0;
    }
  return out;
}

double beyond_range_log_sq(const FittedRange& range, const Model& m, const Strategy& s, const TrainingSettings& t) {
  double sq = 0;
  for (double x : beyond_range_logs(range, m, s, t)) sq += x * x;
  return sq;
}

void set_extrapolation_scale(Uncertainty& u, const Problem& pb, const std::vector<std::size_t>& train,
                             const FitOptions& o) {
  double rt = 0, dt = 0, rm = 0, dm = 0;
  std::size_t nt = 0, nm = 0;
  const SimOptions so = sim_options(pb);
  for (const auto& d : kRangeDims) {
    std::vector<double> values;
    for (auto i : train) values.push_back(d.of(pb.samples[i].model, pb.samples[i].strategy, pb.samples[i].settings));
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    if (values.size() < 2) continue;
    for (const double x : {values.front(), values.back()}) {
      std::vector<std::size_t> held, rest;
      for (auto i : train) {
        const Sample& smp = pb.samples[i];
        (d.of(smp.model, smp.strategy, smp.settings) == x ? held : rest).push_back(i);
      }
      if (rest.size() < 3) continue;
      const FitResult f = fit(pb, rest, o);
      const FittedRange range = fitted_range(pb, rest);
      for (auto i : held) {
        const Sample& smp = pb.samples[i];
        const double d2 = beyond_range_log_sq(range, smp.model, smp.strategy, smp.settings);
        const Prediction p = simulate(smp.model, smp.strategy, pb.system, smp.settings, f.params, so);
        if (!p.ok() || !(d2 > 0)) continue;
        if (smp.time_s > 0) {
          rt += std::pow(std::log(p.iteration_time_s / smp.time_s), 2);
          dt += d2;
          ++nt;
        }
        if (smp.mem_max_bytes > 0) {
          rm += std::pow(std::log(p.max_peak_memory_bytes / smp.mem_max_bytes), 2);
          dm += d2;
          ++nm;
        }
      }
    }
  }
  const double st = u.time_log_sd * u.time_log_sd, sm = u.memory_log_sd * u.memory_log_sd;
  u.extrapolation_time_log_sd = nt ? std::sqrt(std::max(0.0, rt - static_cast<double>(nt) * st) / dt) : 0;
  u.extrapolation_memory_log_sd = nm ? std::sqrt(std::max(0.0, rm - static_cast<double>(nm) * sm) / dm) : 0;
  u.extrapolation_n_time = nt;
  u.extrapolation_n_memory = nm;
}

void borrow_extrapolation_scale(Uncertainty& u, const Uncertainty& start, const std::string& start_file) {
  if (u.extrapolation_n_time + u.extrapolation_n_memory > 0) return;
  if (start.extrapolation_n_time + start.extrapolation_n_memory == 0) return;
  u.extrapolation_time_log_sd = start.extrapolation_time_log_sd;
  u.extrapolation_memory_log_sd = start.extrapolation_memory_log_sd;
  u.extrapolation_n_time = start.extrapolation_n_time;
  u.extrapolation_n_memory = start.extrapolation_n_memory;
  u.extrapolation_from = start.extrapolation_from.empty() ? start_file : start.extrapolation_from;
}

Uncertainty beyond_range(Uncertainty u, double log_sq) {
  if (!(log_sq > 0)) return u;
  auto widen = [&](double& sd, double& dof, double scale, std::size_t n) {
    if (n == 0 || !(scale > 0)) return;
    sd = std::sqrt(sd * sd + scale * scale * log_sq);
    const double held = static_cast<double>(n);
    dof = dof > 0 ? std::min(dof, held) : held;
  };
  widen(u.time_log_sd, u.time_dof, u.extrapolation_time_log_sd, u.extrapolation_n_time);
  widen(u.memory_log_sd, u.memory_dof, u.extrapolation_memory_log_sd, u.extrapolation_n_memory);
  return u;
}

std::optional<LogSensitivity> log_sensitivity(const Model& m, const Strategy& s, const System& sys,
                                              const TrainingSettings& t, const PlatformParams& theta,
                                              const Uncertainty& u, const SimOptions& o) {
  const Prediction p = simulate(m, s, sys, t, theta, o);
  if (!p.ok()) return std::nullopt;
  const std::size_t k = u.free.size();
  LogSensitivity out;
  out.time_s = p.iteration_time_s;
  out.memory_bytes = p.max_peak_memory_bytes;
  out.g_time.assign(k, 0.0);
  out.g_memory.assign(k, 0.0);
  for (std::size_t a = 0; a < k; ++a) {
    // A fitted parameter's posterior is narrow: its local slope is the sensitivity. A prior-only one spans its prior
    // (efficiency ± 0.15), over which a prediction need not be linear: where the attention core hides a context-
    // parallel exchange, a faster flash kernel stops paying off, and the slope at the centre says nearly nothing of
    // a slower one. Its secant over ± one prior sd stands in for the slope.
    const bool prior_only = a + u.n_prior_only >= k;
    const Step sp = step(theta, u.free[a], prior_only ? param_table()[u.free[a]].prior_sd : 0);
    const Prediction lo = simulate(m, s, sys, t, sp.lo, o), hi = simulate(m, s, sys, t, sp.hi, o);
    if (!lo.ok() || !hi.ok() || !(sp.width > 0)) continue;
    out.g_time[a] = (std::log(hi.iteration_time_s) - std::log(lo.iteration_time_s)) / sp.width;
    out.g_memory[a] = (std::log(hi.max_peak_memory_bytes) - std::log(lo.max_peak_memory_bytes)) / sp.width;
  }
  return out;
}

namespace {
// The entries [lo, hi) of `u`'s parameters whose sd alone moves the log time by at least `min_log_sd`, largest first.
std::vector<PriorLean> leans_in(const Uncertainty& u, const LogSensitivity& ls, double min_log_sd, std::size_t lo,
                                std::size_t hi) {
  std::vector<PriorLean> out;
  const std::size_t k = u.free.size();
  if (u.covariance.size() != k * k) return out;
  for (std::size_t a = lo; a < hi && a < k && a < ls.g_time.size(); ++a) {
    const double param_sd = std::sqrt(std::max(0.0, u.covariance[a * k + a]));
    const double sd = std::fabs(ls.g_time[a]) * param_sd;
    if (sd >= min_log_sd) out.push_back({u.free[a], sd, param_sd});
  }
  std::sort(out.begin(), out.end(),
            [](const PriorLean& x, const PriorLean& y) { return x.time_log_sd > y.time_log_sd; });
  return out;
}
}  // namespace

std::vector<PriorLean> prior_leans(const Uncertainty& u, const LogSensitivity& ls, double min_log_sd) {
  const std::size_t k = u.free.size();
  return leans_in(u, ls, min_log_sd, k - std::min(u.n_prior_only, k), k);
}

std::vector<Elasticity> time_elasticities(const Uncertainty& u, const LogSensitivity& ls, const PlatformParams& theta,
                                          double min) {
  std::vector<Elasticity> out;
  const std::size_t k = u.free.size(), fitted = k - std::min(u.n_prior_only, k);
  for (std::size_t a = 0; a < k && a < ls.g_time.size(); ++a) {
    const double e = ls.g_time[a] * get(theta, u.free[a]);
    if (std::isfinite(e) && std::fabs(e) >= min) out.push_back({u.free[a], e, a >= fitted});
  }
  std::sort(out.begin(), out.end(),
            [](const Elasticity& x, const Elasticity& y) { return std::fabs(x.value) > std::fabs(y.value); });
  return out;
}

std::string describe(const std::vector<PriorLean>& leans, const PlatformParams& theta, std::size_t most) {
  std::string s;
  char buf[160];
  for (const PriorLean& l : leans) {
    if (most-- == 0) break;
    const ParamInfo& info = param_table()[l.param];
    std::snprintf(buf, sizeof buf, "%s%s %.4g ± %.4g (time ± %.1f %%)", s.empty() ? "" : ", ", info.name,
                  get(theta, l.param), l.param_sd, 100 * l.time_log_sd);
    s += buf;
  }
  return s;
}

double quad(const Uncertainty& u, const std::vector<double>& g, const std::vector<double>& h) {
  const std::size_t k = u.free.size();
  if (u.covariance.size() != k * k || g.size() != k || h.size() != k) return 0;
  double v = 0;
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = 0; b < k; ++b) v += g[a] * u.covariance[a * k + b] * h[b];
  return v;
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

namespace {
// The regularised incomplete beta function I_x(a, b) by its continued fraction (Abramowitz & Stegun 26.5.8),
// evaluated with the modified Lentz method; for x above (a + 1) / (a + b + 2) through I_x(a, b) = 1 − I_{1−x}(b, a),
// where the fraction converges fast.
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(1 - x, b, a);
  const double tiny = 1e-300;
  const double front =
      std::exp(a * std::log(x) + b * std::log1p(-x) + std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b)) / a;
  double f = 1, c = 1, d = 0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double num = 1;  // the i-th partial numerator; the first is 1
    if (i > 0)
      num = i % 2 == 0 ? m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
                       : -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 + num * d;
    d = 1 / (std::fabs(d) < tiny ? tiny : d);
    c = 1 + num / c;
    if (std::fabs(c) < tiny) c = tiny;
    f *= c * d;
    if (std::fabs(c * d - 1) < 1e-14) break;
  }
  return front * (f - 1);
}
}  // namespace

double student_t_cdf(double t, double dof) {
  if (!(dof > 0)) return normal_cdf(t);
  if (std::isnan(t)) return t;
  // P(|T| > |t|) = I_{ν/(ν+t²)}(ν/2, 1/2).
  const double tail = 0.5 * incomplete_beta(dof / (dof + t * t), dof / 2, 0.5);
  return t > 0 ? 1 - tail : tail;
}

double p_fits(double peak_bytes, double capacity_bytes, double memory_log_sd, double dof) {
  if (!(memory_log_sd > 0)) return std::nan("");
  return student_t_cdf((std::log(capacity_bytes) - std::log(peak_bytes)) / memory_log_sd, dof);
}

double central_quantile(double p, double dof) {
  // The normal quantile of (1 + p) / 2 by Newton's method on the normal CDF from z = 1: Φ is concave above 0, so
  // the iterates rise monotonically to the root; ten steps reach 1e-12 for central coverages up to 99 %.
  const double target = 0.5 * (1 + p);
  double z = 1.0;
  for (int i = 0; i < 10; ++i)
    z -= (normal_cdf(z) - target) * 2.5066282746310002 /* sqrt(2 pi) */ * std::exp(0.5 * z * z);
  if (!(dof > 0)) return z;
  // Student's t from the normal quantile: the Cornish-Fisher expansion of Abramowitz & Stegun 26.7.5, four terms
  // (within 0.3 % of the exact quantile for dof >= 3 at 80 / 90 %, 0.4 % at dof 2, 5 % short at dof 1).
  const double n = dof, z2 = z * z;
  const double g1 = (z2 + 1) * z / 4, g2 = ((5 * z2 + 16) * z2 + 3) * z / 96,
               g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384,
               g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / n + g2 / (n * n) + g3 / (n * n * n) + g4 / (n * n * n * n);
}

LogSds total_log_sds(const Uncertainty& u, const LogSensitivity& ls) {
  const double vt = u.time_log_sd * u.time_log_sd + quad(u, ls.g_time, ls.g_time);
  const double vm = u.memory_log_sd * u.memory_log_sd + quad(u, ls.g_memory, ls.g_memory);
  return {std::sqrt(std::max(0.0, vt)), u.memory_log_sd > 0 ? std::sqrt(std::max(0.0, vm)) : 0.0};
}

TimeSdParts time_sd_parts(const Uncertainty& base, const Uncertainty& widened, const LogSensitivity& ls) {
  TimeSdParts out;
  out.residual = base.time_log_sd;
  out.beyond_range =
      std::sqrt(std::max(0.0, widened.time_log_sd * widened.time_log_sd - base.time_log_sd * base.time_log_sd));
  const std::size_t k = widened.free.size(), fitted = k - std::min(widened.n_prior_only, k);
  double vf = 0, vp = 0;
  for (std::size_t a = 0; a < k && a < ls.g_time.size(); ++a)
    for (std::size_t b = 0; b < k && b < ls.g_time.size(); ++b) {
      const double x = ls.g_time[a] * widened.covariance[a * k + b] * ls.g_time[b];
      (a < fitted && b < fitted ? vf : vp) += x;  // prior-only entries are uncorrelated with the fitted ones
    }
  out.fitted_parameters = std::sqrt(std::max(0.0, vf));
  out.unfitted_priors = std::sqrt(std::max(0.0, vp));
  return out;
}

std::vector<PriorLean> loosely_fitted(const Uncertainty& u, const LogSensitivity& ls, const TimeSdParts& parts) {
  if (parts.fitted_parameters < kLooseFittedLogSd || parts.fitted_parameters <= parts.residual ||
      parts.fitted_parameters <= parts.unfitted_priors)
    return {};
  const std::size_t k = u.free.size();
  return leans_in(u, ls, kLooseFittedLogSd / 4, 0, k - std::min(u.n_prior_only, k));
}

PredictionIntervals intervals(const LogSensitivity& ls, const Uncertainty& u) {
  PredictionIntervals out;
  const LogSds sd = total_log_sds(u, ls);
  out.time_log_sd = sd.time;
  out.memory_log_sd = sd.memory;
  // Central Student-t quantiles with each kind's residual degrees of freedom (normal: 80 % -> 1.2816, 90 % ->
  // 1.6449).
  auto band = [](double v, double sd, double z) { return Interval{v, v * std::exp(-z * sd), v * std::exp(z * sd)}; };
  out.time_s_80 = band(ls.time_s, out.time_log_sd, central_quantile(0.8, u.time_dof));
  out.time_s_90 = band(ls.time_s, out.time_log_sd, central_quantile(0.9, u.time_dof));
  out.memory_bytes_80 = band(ls.memory_bytes, out.memory_log_sd, central_quantile(0.8, u.memory_dof));
  out.memory_bytes_90 = band(ls.memory_bytes, out.memory_log_sd, central_quantile(0.9, u.memory_dof));
  return out;
}

std::optional<PredictionIntervals> intervals(const Model& m, const Strategy& s, const System& sys,
                                             const TrainingSettings& t, const PlatformParams& theta,
                                             const Uncertainty& u, const SimOptions& o) {
  const auto ls = log_sensitivity(m, s, sys, t, theta, u, o);
  if (!ls) return std::nullopt;
  return intervals(*ls, u);
}

void tally(Coverage& c, const PredictionIntervals& iv, double time_s, double mem_max_bytes) {
  auto in = [](const Interval& x, double v) { return v >= x.lower && v <= x.upper ? std::size_t{1} : 0; };
  if (time_s > 0) {
    ++c.n_time;
    c.time_in_80 += in(iv.time_s_80, time_s);
    c.time_in_90 += in(iv.time_s_90, time_s);
  }
  if (mem_max_bytes > 0 && iv.memory_log_sd > 0) {
    ++c.n_memory;
    c.memory_in_80 += in(iv.memory_bytes_80, mem_max_bytes);
    c.memory_in_90 += in(iv.memory_bytes_90, mem_max_bytes);
  }
}

namespace {
// Counts the test runs whose measurements fall inside the intervals of θ `theta` with uncertainty `u`.
void count_coverage(const Problem& pb, const PlatformParams& theta, const Uncertainty& u,
                    const std::vector<std::size_t>& train, const std::vector<std::size_t>& test, Coverage& c) {
  const SimOptions so = sim_options(pb);
  const FittedRange range = fitted_range(pb, train);
  for (auto i : test) {
    const Sample& s = pb.samples[i];
    const bool model_fitted = std::any_of(train.begin(), train.end(), [&](std::size_t j) {
      return pb.samples[j].model_setting == s.model_setting || same_architecture(pb.samples[j].model, s.model);
    });
    const Uncertainty us = for_prediction(u, model_fitted, range, s.model, s.strategy, s.settings).u;
    const auto iv = intervals(s.model, s.strategy, pb.system, s.settings, theta, us, so);
    if (!iv) continue;
    tally(c, *iv, s.time_s, s.mem_max_bytes);
  }
}
}  // namespace

Coverage interval_coverage(const Problem& pb, const CvResult& cv) {
  Coverage c;
  for (std::size_t f = 0; f < cv.folds.size(); ++f)
    count_coverage(pb, cv.folds[f].params, laplace(pb, cv.folds[f].train, cv.folds[f].params), cv.folds[f].train,
                   cv.test_sets[f], c);
  return c;
}

Coverage coverage_of(const Problem& pb, const PlatformParams& theta, const Uncertainty& u,
                     const std::vector<std::size_t>& train, const std::vector<std::size_t>& test) {
  Coverage c;
  count_coverage(pb, theta, u, train, test, c);
  return c;
}

Coverage widened_coverage(const Problem& pb, const CvResult& cv, const FitOptions& o) {
  Coverage c;
  for (std::size_t f = 0; f < cv.folds.size(); ++f) {
    Uncertainty u = laplace(pb, cv.folds[f].train, cv.folds[f].params);
    set_extrapolation_scale(u, pb, cv.folds[f].train, o);
    count_coverage(pb, cv.folds[f].params, u, cv.folds[f].train, cv.test_sets[f], c);
  }
  return c;
}

Coverage unseen_model_coverage(const Problem& pb, const CvResult& outer, CvKind kind, const FitOptions& o) {
  Coverage c;
  if (outer.folds.size() < 3) return c;  // an inner cross-validation by group needs two groups in every fold
  for (std::size_t f = 0; f < outer.folds.size(); ++f) {
    const FitResult& fold = outer.folds[f];
    Uncertainty u = laplace(pb, fold.train, fold.params);
    set_unseen_scale(u, pb, kind, cross_validate(pb, fold.train, {kind, 0}, o));
    set_extrapolation_scale(u, pb, fold.train, o);  // as calibrate records it: the held-out group may lie beyond
    count_coverage(pb, fold.params, u, fold.train, outer.test_sets[f], c);
  }
  return c;
}

UncertaintyJson to_json_form(const Uncertainty& u) {
  UncertaintyJson j;
  static_cast<ResidualScales&>(j) = u;
  const std::size_t k = u.free.size();
  for (std::size_t a = 0; a < k; ++a) {
    (a + u.n_prior_only < k ? j.free : j.prior_only).push_back(param_table()[u.free[a]].name);
    j.covariance.emplace_back(u.covariance.begin() + static_cast<long>(a * k),
                              u.covariance.begin() + static_cast<long>((a + 1) * k));
  }
  return j;
}

Uncertainty from_json_form(const UncertaintyJson& j, const std::string& file) {
  Uncertainty u;
  const std::size_t k = j.free.size() + j.prior_only.size();
  for (const auto* names : {&j.free, &j.prior_only})
    for (const auto& name : *names) {
      const std::string field = names == &j.free ? "uncertainty.free" : "uncertainty.prior_only";
      std::size_t i = kNumParams;
      for (std::size_t p = 0; p < kNumParams; ++p)
        if (name == param_table()[p].name) i = p;
      if (i == kNumParams) throw io::InputError(file, 0, field, "unknown parameter '" + name + "'");
      if (std::find(u.free.begin(), u.free.end(), i) != u.free.end())
        throw io::InputError(file, 0, field, "parameter '" + name + "' is listed twice");
      u.free.push_back(i);
    }
  u.n_prior_only = j.prior_only.size();
  if (j.covariance.size() != k) throw io::InputError(file, 0, "uncertainty.covariance", "expected a square matrix");
  for (const auto& row : j.covariance) {
    if (row.size() != k) throw io::InputError(file, 0, "uncertainty.covariance", "expected a square matrix");
    for (double v : row) {
      if (!std::isfinite(v)) throw io::InputError(file, 0, "uncertainty.covariance", "entries must be finite");
      u.covariance.push_back(v);
    }
  }
  for (std::size_t a = 0; a < k; ++a)
    if (!(u.covariance[a * k + a] >= 0))
      throw io::InputError(file, 0, "uncertainty.covariance", "diagonal entries must be variances (>= 0)");
  if (!(j.time_log_sd >= 0) || !(j.memory_log_sd >= 0) || !std::isfinite(j.time_log_sd) ||
      !std::isfinite(j.memory_log_sd))
    throw io::InputError(file, 0, "uncertainty", "log sds must be finite and non-negative");
  if (!(j.time_dof >= 0) || !(j.memory_dof >= 0) || !std::isfinite(j.time_dof) || !std::isfinite(j.memory_dof))
    throw io::InputError(file, 0, "uncertainty", "degrees of freedom must be finite and non-negative");
  if (!(j.unseen_time_log_sd >= 0) || !(j.unseen_memory_log_sd >= 0) || !std::isfinite(j.unseen_time_log_sd) ||
      !std::isfinite(j.unseen_memory_log_sd))
    throw io::InputError(file, 0, "uncertainty.unseen_model", "log sds must be finite and non-negative");
  if (!(j.extrapolation_time_log_sd >= 0) || !(j.extrapolation_memory_log_sd >= 0) ||
      !std::isfinite(j.extrapolation_time_log_sd) || !std::isfinite(j.extrapolation_memory_log_sd))
    throw io::InputError(file, 0, "uncertainty.extrapolation", "log sds must be finite and non-negative");
  static_cast<ResidualScales&>(u) = j;  // checked above
  return u;
}

}  // namespace lmsim::calib
