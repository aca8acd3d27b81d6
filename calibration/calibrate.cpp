#include "calibration/calibrate.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlopt.hpp>
#include <random>
#include <set>

#include "calibration/metrics.hpp"
#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::calib {

void choose_free(Problem& pb);

Problem make_problem(const io::Dataset& d, const std::string& which, const std::vector<std::string>& models) {
  Problem pb;
  pb.platform = which;
  bool found_system = false;
  for (const auto& c : d.collections) {
    if (c.platform != which && c.system != which) continue;
    if (!models.empty() && std::find(models.begin(), models.end(), c.model_setting) == models.end() &&
        std::find(models.begin(), models.end(), c.model) == models.end())
      continue;
    const io::SystemPreset* sp = io::presets().find_system(c.system);
    if (!found_system) {
      pb.system = sp->system;
      pb.start = sp->default_params;
      found_system = true;
    } else if (pb.system.name != c.system) {
      throw io::InputError(d.root + "/" + c.directory, 0, "system",
                           "platform '" + which + "' mixes systems " + pb.system.name + " and " + c.system +
                               ": calibrate one system at a time (--system)");
    }
    const Model& model = io::presets().find_model(c.model)->model;
    const std::string stack = io::matching_stack(c.settings);
    for (const auto& r : c.runs) {
      if (!r.iteration_time_s && !r.peak_memory_max_bytes) continue;
      Sample s;
      s.model_setting = c.model_setting;
      s.source = c.directory;
      s.config = r.config;
      s.model = model;
      s.strategy = r.strategy;
      s.settings = c.settings;
      s.stack = stack;
      s.time_s = r.iteration_time_s.value_or(0);
      s.mem_max_bytes = r.peak_memory_max_bytes.value_or(0);
      s.mem_rank_bytes = r.peak_memory_bytes;
      pb.samples.push_back(std::move(s));
    }
    for (const auto& m : c.matrix_summary)
      pb.matrix.push_back({c.model_setting, c.settings.precision, static_cast<double>(m.batch),
                           static_cast<double>(m.m), static_cast<double>(m.n), static_cast<double>(m.k), m.median_us});
  }
  if (pb.samples.empty())
    throw io::InputError(d.root, 0, "platform",
                         "no measured runs match platform/system '" + which + "'" +
                             (models.empty() ? std::string() : " and the requested models"));
  choose_free(pb);
  return pb;
}

Problem make_problem(const io::PublishedSet& ps, const std::string& system) {
  Problem pb;
  pb.platform = system;
  const io::SystemPreset* sp = io::presets().find_system(system);
  if (!sp) throw io::InputError("--system", 0, "", "'" + system + "' is not a system preset");
  pb.system = sp->system;
  pb.start = sp->default_params;
  for (const auto& r : ps.runs) {
    if (r.system != system) continue;
    Sample s;
    s.model_setting = r.model.name;
    s.source = r.source;
    s.config = config_name(r.strategy);
    s.model = r.model;
    s.strategy = r.strategy;
    s.settings = r.settings;
    s.stack = r.stack;
    s.time_s = r.time_s;
    s.validation_only = !r.fit;
    pb.samples.push_back(std::move(s));
  }
  if (pb.samples.empty())
    throw io::InputError(ps.root + "/readings.csv", 0, "system", "no published run is on system '" + system + "'");
  choose_free(pb);
  return pb;
}

void choose_free(Problem& pb) {
  // Parameters the data can identify: inter-node ones only if some group crosses a node, score bytes only if
  // some collection stores attention scores, FP8 efficiency only with FP8 runs, memory terms only with memory.
  bool crosses = false, scores = false, fp8 = false, memory = false, overlap = false, flash = false;
  for (const auto& s : pb.samples) {
    memory |= s.mem_max_bytes > 0;
    // dp_overlap prices every NCCL transfer hidden under compute: DP traffic, the interleaved pipeline's sends and
    // CP's ring.
    overlap |= (s.settings.overlap_grad_reduce || s.settings.overlap_param_gather) && s.strategy.data_parallel > 1;
    overlap |= s.settings.overlap_p2p_comm && s.strategy.virtual_pipeline > 1;
    const CpCommType cp_type = s.strategy.cp_comm_type.value_or(s.settings.cp_comm_type);
    overlap |= s.strategy.context_parallel > 1 && (cp_type == CpCommType::p2p || cp_type == CpCommType::a2a_p2p);
    crosses |= s.strategy.devices() > pb.system.devices_per_node;
    scores |= !s.settings.flash_attention;
    fp8 |= quantizes_linear(s.settings.precision);
    flash |= s.settings.flash_attention;
  }
  for (std::size_t i = 0; i < kNumParams; ++i) {
    const std::string n = param_table()[i].name;
    if (!crosses && n == "inter_node_bandwidth_efficiency") continue;
    if ((!scores || !memory) && n == "attention_score_bytes") continue;
    if (!overlap && n == "dp_overlap") continue;
    if (!fp8 && n == "fp8_matmul_efficiency") continue;
    if (!flash && (n == "flash_attention_efficiency" || n == "flash_attention_half_seq")) continue;
    if (!memory && (n == "runtime_memory_gib" || n == "runtime_memory_fraction")) continue;
    pb.free.push_back(i);
  }
}

namespace {
std::size_t param_index(const std::string& name, const char* option) {
  for (std::size_t i = 0; i < kNumParams; ++i)
    if (name == param_table()[i].name) return i;
  if (name == kRetiredParam) throw io::InputError(option, 0, name, kRetiredParamWhy);
  std::string list;
  for (const auto& p : param_table()) list += (list.empty() ? "" : ", ") + std::string(p.name);
  throw io::InputError(option, 0, name, "no such parameter (parameters: " + list + ")");
}
}  // namespace

void restrict_free(Problem& problem, const std::vector<std::string>& free, const std::vector<std::string>& fix) {
  Problem pb = problem;  // all or nothing: an error leaves the problem as it was
  if (!free.empty()) {
    std::vector<std::size_t> f;
    for (const auto& n : free) {
      const std::size_t i = param_index(n, "--free");
      if (std::find(f.begin(), f.end(), i) == f.end()) f.push_back(i);
    }
    std::sort(f.begin(), f.end());
    pb.free = f;
  }
  for (const auto& spec : fix) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos) throw io::InputError("--fix", 0, spec, "expected NAME=VALUE");
    const std::string name = spec.substr(0, eq), text = spec.substr(eq + 1);
    const std::size_t i = param_index(name, "--fix");
    double v = 0;
    const ParamInfo& info = param_table()[i];
    if (!io::parse_number(text, v) || v < info.lower || v > info.upper)
      throw io::InputError(
          "--fix", 0, name,
          "'" + text + "' is not a number in [" + std::to_string(info.lower) + ", " + std::to_string(info.upper) + "]");
    if (!free.empty() && std::find(free.begin(), free.end(), name) != free.end())
      throw io::InputError("--fix", 0, name, "is also given to --free");
    set(pb.start, i, v);
    pb.free.erase(std::remove(pb.free.begin(), pb.free.end(), i), pb.free.end());
    if (std::find(pb.fixed.begin(), pb.fixed.end(), i) == pb.fixed.end()) pb.fixed.push_back(i);
  }
  problem = std::move(pb);
}

std::vector<std::size_t> all_indices(const Problem& pb) {
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < pb.samples.size(); ++i)
    if (!pb.samples[i].validation_only) v.push_back(i);
  return v;
}

std::vector<std::size_t> validation_indices(const Problem& pb) {
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < pb.samples.size(); ++i)
    if (pb.samples[i].validation_only) v.push_back(i);
  return v;
}

std::vector<std::size_t> select(const Problem& pb, const std::vector<std::string>& configs) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < pb.samples.size(); ++i) {
    const Sample& s = pb.samples[i];
    for (const auto& c : configs)
      if (c == s.config || c == s.model_setting + ":" + s.config) {
        out.push_back(i);
        break;
      }
  }
  return out;
}

SimOptions sim_options(const Problem& pb) {
  SimOptions o;
  o.validity = {pb.system.devices_per_node, true, true, true};
  return o;
}

namespace {

double sq_log(double pred, double meas) {
  if (!(pred > 0) || !std::isfinite(pred)) return 100.0;  // keeps the optimizer away from invalid regions
  const double l = std::log(pred / meas);
  return l * l;
}

}  // namespace

double robust_sq(double e2, double d2) { return d2 > 0 && e2 < 100.0 ? 2 * d2 * (std::sqrt(1 + e2 / d2) - 1) : e2; }
double robust_curvature(double e2, double d2) { return d2 > 0 ? std::pow(1 + e2 / d2, -1.5) : 1.0; }

double objective(const Problem& pb, const std::vector<std::size_t>& idx, const PlatformParams& p) {
  const SimOptions so = sim_options(pb);
  double t_err = 0, m_err = 0, t_n = 0, m_n = 0;
  const long n = static_cast<long>(idx.size());
#pragma omp parallel for reduction(+ : t_err, m_err, t_n, m_n) schedule(static) if (n >= 64)
  for (long j = 0; j < n; ++j) {
    const Sample& s = pb.samples[idx[static_cast<std::size_t>(j)]];
    const Prediction pr = simulate(s.model, s.strategy, pb.system, s.settings, p, so);
    if (!pr.ok()) {
      t_err += 100;
      t_n += 1;
      continue;
    }
    if (s.time_s > 0) {
      t_err += robust_sq(sq_log(pr.iteration_time_s, s.time_s), pb.weights.prior);
      t_n += 1;
    }
    if (!s.mem_rank_bytes.empty()) {
      double e = 0;
      for (const auto& rv : s.mem_rank_bytes)
        e += sq_log(pr.stages[static_cast<std::size_t>(rank_coord(s.strategy, rv.rank).pp)].peak_bytes, rv.value);
      m_err += e / static_cast<double>(s.mem_rank_bytes.size());
      m_n += 1;
    } else if (s.mem_max_bytes > 0) {
      m_err += sq_log(pr.max_peak_memory_bytes, s.mem_max_bytes);
      m_n += 1;
    }
  }
  double j = 0;
  if (t_n > 0) j += pb.weights.time * t_err / t_n;
  if (m_n > 0) j += pb.weights.memory * m_err / m_n;
  if (pb.weights.matrix > 0 && !pb.matrix.empty()) {
    // Kernel latencies are profiled in a model's training runs: only those of model settings with a run in `idx`
    // are fitted on, so a held-out model (leave-one-model-out) lends none of its measurements to the fit.
    std::vector<const std::string*> fitted;
    for (auto i : idx) {
      const std::string& ms = pb.samples[i].model_setting;
      if (std::none_of(fitted.begin(), fitted.end(), [&](const std::string* f) { return *f == ms; }))
        fitted.push_back(&ms);
    }
    double x = 0, n_matrix = 0;
    for (const auto& m : pb.matrix) {
      if (std::none_of(fitted.begin(), fitted.end(), [&](const std::string* f) { return *f == m.model_setting; }))
        continue;
      x += sq_log(predict_gemm_us(pb.system, m.dtype, p, m.batch, m.m, m.n, m.k), m.median_us);
      n_matrix += 1;
    }
    if (n_matrix > 0) j += pb.weights.matrix * x / n_matrix;
  }
  if (pb.weights.prior > 0 && !idx.empty())
    for (auto i : pb.free) {
      const double z = (get(p, i) - get(pb.start, i)) / param_table()[i].prior_sd;
      j += pb.weights.prior / static_cast<double>(idx.size()) * z * z;
    }
  return j;
}

std::vector<SamplePrediction> time_outliers(const Problem& pb, const std::vector<SamplePrediction>& preds) {
  std::vector<SamplePrediction> out;
  if (!(pb.weights.prior > 0)) return out;
  const double limit = 3 * std::sqrt(pb.weights.prior);
  for (const auto& p : preds) {
    const double measured = pb.samples[p.index].time_s;
    if (measured > 0 && p.time_s > 0 && std::fabs(std::log(p.time_s / measured)) > limit) out.push_back(p);
  }
  return out;
}

bool memory_param(std::size_t i) {
  const std::string n = param_table()[i].name;
  return n == "runtime_memory_gib" || n == "runtime_memory_fraction" || n == "attention_score_bytes";
}

FitResult fit(const Problem& pb, const std::vector<std::size_t>& train, const FitOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (train.empty()) throw io::InputError("calibration", 0, "calibrate-on", "no configurations to fit on");
  // Time and memory depend on disjoint parameters, so the objective separates: fit each part on its own. The
  // optimum is the same, but each search sees only its own error (one part's residual no longer loosens the
  // other's stopping tolerance), which makes fits on few configurations (a leave-one-model-out fold) stable.
  std::vector<std::size_t> time_free, memory_free;
  for (auto i : pb.free) (memory_param(i) ? memory_free : time_free).push_back(i);
  if (!time_free.empty() && !memory_free.empty()) {
    Problem pt = pb;
    pt.free = time_free;
    pt.weights.memory = 0;
    const FitResult a = fit(pt, train, o);
    Problem pm = pb;
    pm.free = memory_free;
    pm.start = a.params;  // the fitted time parameters, held
    for (auto i : memory_free) set(pm.start, i, get(pb.start, i));
    pm.weights.time = 0;
    pm.weights.matrix = 0;
    FitResult r = fit(pm, train, o);
    r.evaluations += a.evaluations;
    r.on_bounds.insert(r.on_bounds.begin(), a.on_bounds.begin(), a.on_bounds.end());
    r.objective = objective(pb, train, r.params);
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  const auto& table = param_table();
  const std::size_t k = pb.free.size();
  FitResult r;
  r.train = train;
  struct Ctx {
    const Problem* pb;
    const std::vector<std::size_t>* idx;
    int evals;
  } ctx{&pb, &train, 0};
  auto to_params = [&](const std::vector<double>& u) {
    PlatformParams p = pb.start;
    for (std::size_t i = 0; i < k; ++i) {
      const ParamInfo& info = table[pb.free[i]];
      set(p, pb.free[i], info.lower + std::clamp(u[i], 0.0, 1.0) * (info.upper - info.lower));
    }
    return p;
  };
  auto to_unit = [&](const PlatformParams& p) {
    std::vector<double> u(k);
    for (std::size_t i = 0; i < k; ++i) {
      const ParamInfo& info = table[pb.free[i]];
      u[i] = std::clamp((get(p, pb.free[i]) - info.lower) / (info.upper - info.lower), 0.0, 1.0);
    }
    return u;
  };
  struct Fn {
    Ctx* c;
    decltype(to_params)* tp;
  } fn{&ctx, &to_params};
  auto f = [](const std::vector<double>& u, std::vector<double>&, void* data) {
    Fn* fp = static_cast<Fn*>(data);
    ++fp->c->evals;
    return objective(*fp->c->pb, *fp->c->idx, (*fp->tp)(u));
  };
  auto algorithm = [](const std::string& name) {
    static const std::map<std::string, nlopt::algorithm> algs = {
        {"GN_CRS2_LM", nlopt::GN_CRS2_LM},       {"GN_ISRES", nlopt::GN_ISRES},
        {"GN_DIRECT_L", nlopt::GN_DIRECT_L},     {"GN_ESCH", nlopt::GN_ESCH},
        {"LN_BOBYQA", nlopt::LN_BOBYQA},         {"LN_SBPLX", nlopt::LN_SBPLX},
        {"LN_NELDERMEAD", nlopt::LN_NELDERMEAD}, {"LN_COBYLA", nlopt::LN_COBYLA}};
    auto it = algs.find(name);
    if (it == algs.end()) throw io::InputError("calibration", 0, "algorithm", "unknown NLopt algorithm '" + name + "'");
    return it->second;
  };
  const std::vector<double> lo(k, 0.0), hi(k, 1.0);
  nlopt::srand(o.seed);
  std::vector<double> best_u = to_unit(pb.start);
  double best = objective(pb, train, pb.start);
  // Runs one bounded NLopt stage from u and keeps the result if it improves on the best so far.
  auto stage = [&](nlopt::algorithm alg, int evals, std::vector<double> u, bool polish) {
    nlopt::opt opt(alg, static_cast<unsigned>(k));
    opt.set_lower_bounds(lo);
    opt.set_upper_bounds(hi);
    opt.set_min_objective(f, &fn);
    opt.set_maxeval(evals);
    opt.set_ftol_rel(o.ftol_rel);
    if (polish) opt.set_xtol_rel(1e-8);
    double val = 0;
    try {
      opt.optimize(u, val);
    } catch (const nlopt::roundoff_limited&) {  // converged as far as floating point allows: keep u
    } catch (const nlopt::forced_stop&) {
    } catch (const std::invalid_argument& e) {
      throw io::InputError("calibration", 0, "algorithm",
                           std::string("NLopt rejected ") + opt.get_algorithm_name() + " on " + std::to_string(k) +
                               " free parameters: " + e.what());
    }
    val = objective(pb, train, to_params(u));
    if (val < best) {
      best = val;
      best_u = u;
    }
  };
  if (k > 0 && o.global_evals > 0) stage(algorithm(o.global_algorithm), o.global_evals, best_u, false);
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  std::vector<std::vector<double>> starts = {best_u, to_unit(pb.start)};
  for (int s = 2; s < o.starts; ++s) {
    std::vector<double> u(k);
    for (auto& x : u) x = uni(rng);
    starts.push_back(u);
  }
  // BOBYQA's quadratic model needs two dimensions; one free parameter is polished with COBYLA instead.
  const nlopt::algorithm local =
      (k == 1 && o.local_algorithm == "LN_BOBYQA") ? nlopt::LN_COBYLA : algorithm(o.local_algorithm);
  for (int s = 0; s < o.starts && k > 0 && o.local_evals > 0; ++s)
    stage(local, o.local_evals, starts[static_cast<std::size_t>(s)], true);
  r.params = to_params(best_u);
  r.objective = best;
  r.evaluations = ctx.evals;
  for (std::size_t i = 0; i < k; ++i)
    if (best_u[i] < 1e-3 || best_u[i] > 1 - 1e-3) r.on_bounds.push_back(table[pb.free[i]].name);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<SamplePrediction> predict(const Problem& pb, const std::vector<std::size_t>& idx, const PlatformParams& p) {
  const SimOptions so = sim_options(pb);
  std::vector<SamplePrediction> out;
  for (auto i : idx) {
    const Sample& s = pb.samples[i];
    const Prediction pr = simulate(s.model, s.strategy, pb.system, s.settings, p, so);
    out.push_back(
        {i, pr.iteration_time_s, pr.max_peak_memory_bytes, per_rank_peak_memory(pr, s.strategy), pr.feasible});
  }
  return out;
}

namespace {
StratumReport stratum(const Problem& pb, const std::string& name, const std::vector<const SamplePrediction*>& ps) {
  StratumReport st;
  st.name = name;
  st.time_spearman = st.time_kendall = std::nan("");  // undefined without time rows
  std::vector<double> pt, mt, pm, mm;
  std::vector<std::string> cfg;
  for (const auto* p : ps) {
    const Sample& s = pb.samples[p->index];
    if (s.time_s > 0) {
      pt.push_back(p->time_s);
      mt.push_back(s.time_s);
      cfg.push_back(s.config);
    }
    if (s.mem_max_bytes > 0) {
      pm.push_back(p->mem_max_bytes);
      mm.push_back(s.mem_max_bytes);
    }
  }
  st.n = pt.size();
  if (!pt.empty()) {
    st.time_spearman = metrics::spearman(pt, mt);
    st.time_kendall = metrics::kendall_tau_b(pt, mt);
    st.top1_hit = metrics::top1_hit(pt, mt);
    st.top1_regret_pct = metrics::regret_at_k_pct(pt, mt, 1);
    st.top3_regret_pct = metrics::regret_at_k_pct(pt, mt, 3);
    st.top3_overlap = metrics::top_k_overlap(pt, mt, 3);
    st.predicted_best = cfg[metrics::top_k(pt, 1)[0]];
    st.measured_best = cfg[metrics::top_k(mt, 1)[0]];
  }
  st.memory_spearman = metrics::spearman(pm, mm);
  return st;
}
}  // namespace

Report score(const Problem& pb, const std::vector<SamplePrediction>& preds) {
  Report r;
  std::vector<double> pt, mt, pm, mm, prank, mrank;
  std::vector<bool> pf, mf;
  std::map<std::string, std::vector<const SamplePrediction*>> by_model, by_stratum;
  for (const auto& p : preds) {
    const Sample& s = pb.samples[p.index];
    if (s.time_s > 0) {
      pt.push_back(p.time_s);
      mt.push_back(s.time_s);
    }
    if (s.mem_max_bytes > 0) {
      pm.push_back(p.mem_max_bytes);
      mm.push_back(s.mem_max_bytes);
    }
    for (const auto& rv : s.mem_rank_bytes) {
      prank.push_back(p.mem_rank_bytes[static_cast<std::size_t>(rv.rank)]);
      mrank.push_back(rv.value);
    }
    pf.push_back(p.feasible);
    mf.push_back(true);  // every measured run completed: it fitted on the device
    by_model[s.model_setting].push_back(&p);
    by_stratum[s.model_setting + "/" + (s.recompute() ? "RC" : "noRC")].push_back(&p);
  }
  r.n_time = pt.size();
  r.n_memory = pm.size();
  r.time_mae_s = metrics::mae(pt, mt);
  r.time_smape_pct = metrics::smape_pct(pt, mt);
  r.time_r2 = metrics::r2(pt, mt);
  r.time_mape_pct = metrics::mape_pct(pt, mt);
  for (std::size_t i = 0; i < pt.size(); ++i)
    r.time_max_ape_pct = std::max(r.time_max_ape_pct, 100 * std::fabs(pt[i] / mt[i] - 1));
  r.memory_mape_pct = metrics::mape_pct(pm, mm);
  r.memory_smape_pct = metrics::smape_pct(pm, mm);
  r.memory_rank_mape_pct = prank.empty() ? std::nan("") : metrics::mape_pct(prank, mrank);
  r.memory_spearman = metrics::spearman(pm, mm);
  r.feasible_agreement = metrics::feasible_agreement(pf, mf);
  // The minimum over models of the defined coefficients; undefined (NaN) when none is, never a silent 1.0.
  auto min_defined = [](double acc, double v) { return std::isnan(v) ? acc : std::isnan(acc) ? v : std::min(acc, v); };
  r.min_model_time_spearman = r.min_model_memory_spearman = std::nan("");
  for (const auto& [name, ps] : by_model) {
    r.models.push_back(stratum(pb, name, ps));
    r.min_model_time_spearman = min_defined(r.min_model_time_spearman, r.models.back().time_spearman);
    r.min_model_memory_spearman = min_defined(r.min_model_memory_spearman, r.models.back().memory_spearman);
  }
  for (const auto& [name, ps] : by_stratum) {
    r.strata.push_back(stratum(pb, name, ps));
    r.top1_strata_hits += r.strata.back().top1_hit > 0 ? 1 : 0;
  }
  return r;
}

CvSpec parse_cv(const std::string& text) {
  CvSpec cv;
  if (text.empty() || text == "none") return cv;
  if (text == "loo") {
    cv.kind = CvKind::loo;
  } else if (text == "leave-one-model-out") {
    cv.kind = CvKind::leave_one_model_out;
  } else if (text == "leave-one-source-out") {
    cv.kind = CvKind::leave_one_source_out;
  } else if (text.rfind("kfold=", 0) == 0) {
    cv.kind = CvKind::kfold;
    double k = 0;
    const std::string ks = text.substr(6);
    char* end = nullptr;
    k = std::strtod(ks.c_str(), &end);
    if (ks.empty() || *end || k < 2 || k > 1000 || k != std::floor(k))
      throw io::InputError("--cv", 0, "", "'" + text + "': K must be an integer in [2, 1000]");
    cv.k = static_cast<int>(k);
  } else {
    throw io::InputError("--cv", 0, "",
                         "'" + text + "' is not loo, kfold=K, leave-one-model-out or leave-one-source-out");
  }
  return cv;
}

CvResult cross_validate(const Problem& pb, const std::vector<std::size_t>& idx, const CvSpec& cv, const FitOptions& o) {
  CvResult res;
  std::vector<std::vector<std::size_t>> tests;
  if (cv.kind == CvKind::loo) {
    for (auto i : idx) tests.push_back({i});
  } else if (cv.kind == CvKind::kfold) {
    // Deterministic interleaved folds over the given order.
    tests.resize(static_cast<std::size_t>(std::min<int>(cv.k, static_cast<int>(idx.size()))));
    for (std::size_t j = 0; j < idx.size(); ++j) tests[j % tests.size()].push_back(idx[j]);
  } else if (cv.kind == CvKind::leave_one_model_out || cv.kind == CvKind::leave_one_source_out) {
    const bool by_model = cv.kind == CvKind::leave_one_model_out;
    std::map<std::string, std::vector<std::size_t>> by;
    for (auto i : idx) by[by_model ? pb.samples[i].model_setting : pb.samples[i].source].push_back(i);
    if (by.size() < 2)
      throw io::InputError("--cv", 0, "",
                           by_model ? "leave-one-model-out needs at least two model settings"
                                    : "leave-one-source-out needs at least two sources");
    for (auto& [_, v] : by) tests.push_back(v);
  } else {
    return res;
  }
  for (const auto& test : tests) {
    const std::set<std::size_t> ts(test.begin(), test.end());
    std::vector<std::size_t> train;
    for (auto i : idx)
      if (!ts.count(i)) train.push_back(i);
    FitResult fr = fit(pb, train, o);
    for (auto& p : predict(pb, test, fr.params)) res.out_of_sample.push_back(std::move(p));
    res.folds.push_back(std::move(fr));
    res.test_sets.push_back(test);
  }
  std::sort(res.out_of_sample.begin(), res.out_of_sample.end(),
            [](const SamplePrediction& a, const SamplePrediction& b) { return a.index < b.index; });
  res.report = score(pb, res.out_of_sample);
  return res;
}

std::vector<CoverageRow> calibration_coverage(const Problem& pb, std::vector<std::size_t> fixed_test,
                                              const FitOptions& o) {
  if (fixed_test.empty())
    for (std::size_t i = 0; i < pb.samples.size(); i += 3) fixed_test.push_back(i);
  const std::set<std::size_t> ts(fixed_test.begin(), fixed_test.end());
  std::map<std::string, std::vector<std::size_t>> shapes;
  for (std::size_t i = 0; i < pb.samples.size(); ++i) {
    if (ts.count(i)) continue;
    const Strategy& s = pb.samples[i].strategy;
    shapes["all remaining"].push_back(i);
    if (s.tensor_parallel == 1 || s.tensor_parallel == 8) shapes["TP endpoints (tp1, tp8)"].push_back(i);
    if (s.pipeline_parallel == 1) shapes["pp1 only"].push_back(i);
    if (s.recompute == Recompute::full) shapes["RC only"].push_back(i);
    if (s.recompute == Recompute::none) shapes["noRC only"].push_back(i);
  }
  std::vector<CoverageRow> out;
  for (const auto& [name, idx] : shapes) {
    if (idx.size() < 3) continue;
    const FitResult f = fit(pb, idx, o);
    out.push_back({name, idx.size(), fixed_test.size(), score(pb, predict(pb, fixed_test, f.params))});
  }
  return out;
}

}  // namespace lmsim::calib
