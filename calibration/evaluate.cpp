#include "calibration/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "calibration/metrics.hpp"
#include "io/csv.hpp"
#include "io/error.hpp"
#include "io/specs.hpp"

namespace lmsim::eval {

namespace {

// Median wall time of one simulate() of this sample (repeated to get above the clock's resolution).
double time_simulation(const calib::Problem& pb, const calib::Sample& s, const PlatformParams& p) {
  std::vector<double> runs;
  SimOptions so;
  so.validity = {pb.system.devices_per_node, true, true, true};
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    double sink = 0;
    for (int i = 0; i < 200; ++i) sink += simulate(s.model, s.strategy, pb.system, s.settings, p, so).iteration_time_s;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile double keep = sink;  // the loop's result is used, so it is not optimised away
    (void)keep;
    runs.push_back(dt / 200);
  }
  return metrics::median(runs);
}

std::string share_key(const std::string& primitive) {
  if (primitive == "send_recv" || primitive == "send" || primitive == "receive" || primitive == "recv" ||
      primitive == "point_to_point")
    return "point_to_point";
  return primitive;
}

// Measured communication shares: comm_summary.csv of the collection, else the paper's pooled shares file. A
// profiler's elapsed time of a communication op includes its wait for the peers: a pipeline stage spends its idle
// time (the bubble, and the wait for slower stages) inside its blocking receives. Where the summary records the
// wait it is taken out, and transfers are compared with transfers; the paper's pooled shares (Table 30) keep it
// (point-to-point reads 42 % of the V100's communication time there), so against them each predicted stage's idle
// time counts where the profiler saw it (pipeline_idle).
struct MeasuredShares {
  std::map<std::string, double> by_primitive;
  bool includes_wait = false;
};
MeasuredShares measured_shares(const io::Dataset& d, const io::Collection& c) {
  MeasuredShares m;
  std::map<std::string, double>& out = m.by_primitive;
  for (const auto& row : c.comm_summary)
    out[share_key(row.comm_type)] += std::max(0.0, row.elapsed_time_sum_s - row.wait_time_sum_s);
  if (!out.empty()) return m;
  m.includes_wait = true;
  const std::string f = d.root + "/paired_time_shares.csv";
  if (!std::filesystem::exists(f)) return m;
  const io::CsvTable t = io::read_csv(f, {"component_kind", "component"});
  std::string prefix = c.model_setting;
  const auto cut = prefix.rfind('_');
  if (cut != std::string::npos) prefix = prefix.substr(0, cut);  // qwen3_0.6b_4k -> qwen3_0.6b
  const std::string col = prefix + "_" + c.platform + "_pct";
  if (!t.has(col)) return m;
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    if (t.text(i, "component_kind") == "communication_primitive")
      out[share_key(t.text(i, "component"))] = t.number(i, col, 0, 100);
  return m;
}

// One rank per stage: the time it idles in an iteration (the iteration less its micro-batches, exposed
// data-parallel traffic and optimizer step), seconds, split by where a profiler sees it. Stage i finishes its last
// backward i chunk-backwards before stage 0 and waits them out in the all-reduce that follows over the pipeline
// ranks (the gradient norm's, and the tied embedding's); the rest of its idle time, the fill and the waits for
// slower neighbours, passes inside its blocking receives.
struct PipelineIdle {
  double receive_s = 0, all_reduce_s = 0;
};
PipelineIdle pipeline_idle(const Prediction& pr, int vpp) {
  PipelineIdle w;
  const double mb = static_cast<double>(pr.num_micro_batches);
  for (int i = 0; i < pr.num_stages; ++i) {
    const StageResult& st = pr.stages[static_cast<std::size_t>(i)];
    const double idle =
        std::max(0.0, pr.iteration_time_s - (mb * st.per_microbatch_s + st.dp_comm_exposed_s + st.optimizer_s));
    const double drain = std::min(idle, i * (st.backward_compute_s + st.recompute_s) / std::max(1, vpp));
    w.all_reduce_s += drain;
    w.receive_s += idle - drain;
  }
  return w;
}

void components(const io::Dataset& d, const io::Collection& c, const calib::Problem& pb, const PlatformParams& p,
                bool lmsim_predictions, ComponentReport& out) {
  // Matrix kernels: the per-rank files where present, else the matched-problem summary.
  std::vector<double> pred, meas;
  for (const auto& run : c.runs)
    for (const auto& rf : run.ranks)
      for (const auto& mo : rf.matrix) {
        pred.push_back(predict_gemm_us(pb.system, c.settings.precision, p, static_cast<double>(mo.batch),
                                       static_cast<double>(mo.m), static_cast<double>(mo.n),
                                       static_cast<double>(mo.k)));
        meas.push_back(mo.duration_us);
      }
  if (pred.empty())
    for (const auto& ms : c.matrix_summary) {
      pred.push_back(predict_gemm_us(pb.system, c.settings.precision, p, static_cast<double>(ms.batch),
                                     static_cast<double>(ms.m), static_cast<double>(ms.n), static_cast<double>(ms.k)));
      meas.push_back(ms.median_us);
    }
  if (lmsim_predictions && !pred.empty()) {
    out.matrix_n = pred.size();
    out.matrix_mae_us = metrics::mae(pred, meas);
    out.matrix_smape_pct = metrics::smape_pct(pred, meas);
    out.matrix_r2 = metrics::r2(pred, meas);
    out.matrix_spearman = metrics::spearman(pred, meas);
    std::vector<double> np, nm;  // slowest-k: rank by negated latency
    for (double v : pred) np.push_back(-v);
    for (double v : meas) nm.push_back(-v);
    out.matrix_slowest3_overlap = metrics::top_k_overlap(np, nm, 3);
  }
  if (!lmsim_predictions) return;
  // Step trace: compute and exposed communication per configuration (mean over the ranks that report).
  std::vector<double> pc, mc, pe, me;
  SimOptions so;
  so.validity = {pb.system.devices_per_node, true, true, true};
  const Model& model = io::presets().find_model(c.model)->model;
  const MeasuredShares measured_m = measured_shares(d, c);
  std::map<std::string, double> predicted;
  for (const auto& run : c.runs) {
    const Prediction pr = simulate(model, run.strategy, pb.system, c.settings, p, so);
    if (!pr.ok()) continue;
    for (const auto& col : collective_diagnostics(model, run.strategy, pb.system, c.settings, p))
      predicted[share_key(col.primitive)] += col.predicted_ms * col.count;
    if (measured_m.includes_wait && run.strategy.pipeline_parallel > 1) {
      const PipelineIdle w = pipeline_idle(pr, run.strategy.virtual_pipeline);
      predicted["point_to_point"] += 1e3 * w.receive_s;
      predicted["all_reduce"] += 1e3 * w.all_reduce_s;
    }
    if (run.step_trace.empty()) continue;
    double comp = 0, exposed = 0;
    for (const auto& st : run.step_trace) {
      comp += st.computing_s;
      exposed += st.communication_not_overlapped_s;
    }
    const double n = static_cast<double>(run.step_trace.size());
    double busy = 0, comm = 0;  // a step trace's "computing" and "communication not overlapped"
    for (const auto& term : breakdown_terms()) {
      const double v = pr.breakdown.*(term.field);
      if (term.kind == TermKind::compute || term.kind == TermKind::optimizer) busy += v;
      if (term.kind == TermKind::exposed) comm += v;
    }
    pc.push_back(busy);
    mc.push_back(comp / n);
    pe.push_back(comm);
    me.push_back(exposed / n);
  }
  out.trace_n = pc.size();
  if (!pc.empty()) {
    out.compute_smape_pct = metrics::smape_pct(pc, mc);
    out.compute_r2 = metrics::r2(pc, mc);
    out.comm_exposed_smape_pct = metrics::smape_pct(pe, me);
    out.comm_exposed_r2 = metrics::r2(pe, me);
  }
  const std::map<std::string, double>& measured = measured_m.by_primitive;
  double tp = 0, tm = 0;
  for (const auto& [k, v] : predicted) tp += v;
  for (const auto& [k, v] : measured) tm += v;
  for (const auto& [k, v] : predicted) out.predicted_comm_share[k] = tp > 0 ? 100 * v / tp : 0;
  for (const auto& [k, v] : measured) out.measured_comm_share[k] = tm > 0 ? 100 * v / tm : 0;
  if (tm > 0 && tp > 0) out.comm_share_jsd = metrics::jensen_shannon(measured, predicted);
}

CollectionEvaluation start(const io::Dataset& d, const io::Collection& c, const std::string& predictor) {
  CollectionEvaluation e;
  e.model_setting = c.model_setting;
  e.platform = c.platform;
  e.system = c.system;
  e.predictor = predictor;
  e.problem = calib::make_problem(d, c.platform, {c.model_setting});
  return e;
}

bool wanted(const io::Collection& c, const std::vector<std::string>& models) {
  return models.empty() || std::find(models.begin(), models.end(), c.model_setting) != models.end() ||
         std::find(models.begin(), models.end(), c.model) != models.end();
}

}  // namespace

std::optional<std::string> fitted_as(const std::vector<std::string>& fitted_models,
                                     const std::vector<Model>& fitted_specs, const Model& m) {
  if (std::find(fitted_models.begin(), fitted_models.end(), m.name) != fitted_models.end()) return m.name;
  for (const Model& f : fitted_specs)
    if (same_architecture(f, m)) return f.name;
  return std::nullopt;
}

namespace {

// Every prediction's 80 / 90 % intervals from θ's covariance, and how many measurements they hold: a run of a model
// θ was not fitted on takes θ's held-out-model scale where it has one, a run beyond θ's fitted range is widened by
// θ's extrapolation scale.
void add_intervals(CollectionEvaluation& e, const Theta& t) {
  const SimOptions so = calib::sim_options(e.problem);
  const double nan = std::nan("");
  e.intervals_from_priors = calib::time_from_priors(*t.uncertainty);
  for (const auto& pr : e.predictions) {
    const calib::Sample& s = e.problem.samples[pr.index];
    const calib::PredictionUncertainty u =
        calib::for_prediction(*t.uncertainty, t.fitted_models.empty() || fitted_on(t, s.model), t.fitted_range, s.model,
                              s.strategy, s.settings);
    e.held_out_model_scale = e.held_out_model_scale || u.held_out_scale;
    const auto iv = calib::intervals(s.model, s.strategy, e.problem.system, s.settings, t.params, u.u, so);
    const calib::Interval none{nan, nan, nan};
    e.intervals.push_back(iv ? *iv : calib::PredictionIntervals{none, none, none, none, nan, nan});
    if (iv) calib::tally(e.coverage, *iv, s.time_s, s.mem_max_bytes);
  }
}

}  // namespace

std::vector<CollectionEvaluation> evaluate_lmsim(const io::Dataset& d, const std::map<std::string, Theta>& theta,
                                                 const std::vector<std::string>& models) {
  std::vector<CollectionEvaluation> out;
  for (const auto& c : d.collections) {
    if (!wanted(c, models)) continue;
    CollectionEvaluation e = start(d, c, "lmsim");
    Theta t{e.problem.start, "", std::nullopt, {}, {}, {}, {}, {}};
    if (auto it = theta.find(c.platform); it != theta.end()) {
      t = it->second;
      if (t.source.empty()) t.source = "given θ for platform " + c.platform;
    } else if (auto jt = theta.find(c.system); jt != theta.end()) {
      t = jt->second;
      if (t.source.empty()) t.source = "given θ for system " + c.system;
    } else if (const io::SystemPreset* sp = io::presets().find_system(c.system)) {
      t.params = sp->params();
      t.source = sp->params_source();
      if (sp->calibrated_file.empty()) t.uncertainty = calib::prior_uncertainty();  // the priors' widths
    }
    const PlatformParams& p = t.params;
    e.theta_source = t.source;
    const auto idx = calib::all_indices(e.problem);
    e.predictions = calib::predict(e.problem, idx, p);
    e.report = calib::score(e.problem, e.predictions);
    for (auto i : idx) e.simulation_wall_s.push_back(time_simulation(e.problem, e.problem.samples[i], p));
    e.median_simulation_wall_s = metrics::median(e.simulation_wall_s);
    components(d, c, e.problem, p, true, e.components);
    if (t.uncertainty) {
      e.theta_fitted_on_model = !e.problem.samples.empty() && fitted_on(t, e.problem.samples.front().model);
      add_intervals(e, t);
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) throw io::InputError(d.root, 0, "models", "no measured collection matches the requested models");
  return out;
}

std::vector<CollectionEvaluation> evaluate_published(const io::PublishedSet& ps,
                                                     const std::map<std::string, Theta>& theta) {
  std::vector<CollectionEvaluation> out;
  std::set<std::string> systems;
  for (const auto& r : ps.runs) systems.insert(r.system);
  for (const auto& system : systems) {
    const calib::Problem pb = calib::make_problem(ps, system);
    Theta t{pb.start, "", std::nullopt, {}, {}, {}, {}, {}};
    if (auto it = theta.find(system); it != theta.end()) {
      t = it->second;
      if (t.source.empty()) t.source = "given θ for system " + system;
    } else if (const io::SystemPreset* sp = io::presets().find_system(system)) {
      // Without θ's provenance the runs it was fitted on are unknown: the uncalibrated guess, never in-sample.
      t.params = sp->default_params;
      t.source = "uncalibrated preset defaults of " + system;
      t.uncertainty = calib::prior_uncertainty();  // the priors' widths
    }
    std::set<std::string> sources;
    for (const auto& s : pb.samples) sources.insert(s.source);
    for (const auto& source : sources)
      for (const bool in_sample : {false, true}) {
        std::vector<std::size_t> idx;
        for (std::size_t i = 0; i < pb.samples.size(); ++i) {
          const calib::Sample& s = pb.samples[i];
          const bool fitted = std::find(t.fitted_configurations.begin(), t.fitted_configurations.end(),
                                        s.model_setting + ":" + s.config) != t.fitted_configurations.end();
          if (s.source == source && fitted == in_sample) idx.push_back(i);
        }
        if (idx.empty()) continue;
        CollectionEvaluation e;
        e.model_setting = source;
        e.platform = system;
        e.system = system;
        e.predictor = in_sample ? "lmsim_in_sample" : "lmsim";
        e.problem = pb;
        e.theta_source = t.source;
        e.predictions = calib::predict(e.problem, idx, t.params);
        e.report = calib::score(e.problem, e.predictions);
        for (auto i : idx) e.simulation_wall_s.push_back(time_simulation(e.problem, e.problem.samples[i], t.params));
        e.median_simulation_wall_s = metrics::median(e.simulation_wall_s);
        e.theta_fitted_on_model = in_sample;
        if (t.uncertainty) add_intervals(e, t);
        out.push_back(std::move(e));
      }
  }
  if (out.empty()) throw io::InputError(ps.root, 0, "", "no published run to evaluate");
  return out;
}

std::vector<CollectionEvaluation> evaluate_file(const io::Dataset& d, const std::string& csv, const std::string& name,
                                                const std::vector<std::string>& models) {
  const io::CsvTable t =
      io::read_csv(csv, {"model_setting", "platform", "optimization_config", "iteration_time_s", "peak_memory_gib"});
  struct Pred {
    double time = 0, mem_max = 0, wall = -1;
    std::map<int, double> ranks;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Pred> preds;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const std::string ms = t.text(i, "model_setting"), plat = t.text(i, "platform"),
                      cfg = t.text(i, "optimization_config");
    if (plat != "gpu" && plat != "npu" && !io::presets().find_system(plat))
      t.fail(i, "platform", "'" + plat + "' is not gpu, npu or a system preset");
    if (!parse_config_name(cfg).strategy) t.fail(i, "optimization_config", parse_config_name(cfg).error);
    Pred& p = preds[{ms, plat, cfg}];
    const double time = t.positive(i, "iteration_time_s", 1e9);
    const double mem = t.positive(i, "peak_memory_gib", 1e6) * 1073741824.0;
    if (p.time > 0 && p.time != time) t.fail(i, "iteration_time_s", "conflicts with an earlier row of '" + cfg + "'");
    p.time = time;
    const std::string rank = t.has("rank_id") ? t.at(i, t.col("rank_id")) : std::string();
    if (rank.empty() || rank == "max") {
      p.mem_max = std::max(p.mem_max, mem);
    } else {
      const int r = static_cast<int>(t.integer(i, "rank_id", 0, 1 << 20));
      if (!p.ranks.emplace(r, mem).second) t.fail(i, "rank_id", "duplicate rank for '" + cfg + "'");
      p.mem_max = std::max(p.mem_max, mem);
    }
    if (t.has("simulation_wall_s") && !t.at(i, t.col("simulation_wall_s")).empty())
      p.wall = t.number(i, "simulation_wall_s", 0, 1e9);
  }
  std::vector<CollectionEvaluation> out;
  for (const auto& c : d.collections) {
    if (!wanted(c, models)) continue;
    CollectionEvaluation e = start(d, c, name);
    for (std::size_t i = 0; i < e.problem.samples.size(); ++i) {
      const auto& s = e.problem.samples[i];
      auto it = preds.find({c.model_setting, c.platform, s.config});
      if (it == preds.end()) continue;  // the tool did not predict this configuration: scored on what it did
      calib::SamplePrediction sp{i, it->second.time, it->second.mem_max, {}, true};
      sp.mem_rank_bytes.assign(static_cast<std::size_t>(s.strategy.devices()), it->second.mem_max);
      for (const auto& [r, v] : it->second.ranks)
        if (r < s.strategy.devices()) sp.mem_rank_bytes[static_cast<std::size_t>(r)] = v;
      sp.feasible = it->second.mem_max <= e.problem.system.hbm_capacity_bytes;
      e.predictions.push_back(sp);
      if (it->second.wall >= 0) e.simulation_wall_s.push_back(it->second.wall);
    }
    if (e.predictions.empty()) continue;
    e.report = calib::score(e.problem, e.predictions);
    if (!e.simulation_wall_s.empty()) e.median_simulation_wall_s = metrics::median(e.simulation_wall_s);
    components(d, c, e.problem, e.problem.start, false, e.components);
    out.push_back(std::move(e));
  }
  if (out.empty())
    throw io::InputError(csv, 0, "optimization_config",
                         "no prediction matches a measured configuration of the dataset");
  return out;
}

}  // namespace lmsim::eval
