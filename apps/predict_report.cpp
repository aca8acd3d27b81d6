#include "apps/predict_report.hpp"

#include <spdlog/spdlog.h>

#include "apps/emit.hpp"

namespace lmsim::app {

namespace {
template <class Owner, std::size_t N>
io::Json terms_json(const Owner& x, const std::array<TermInfo<Owner>, N>& terms) {
  io::Json j = io::Json::object();
  for (const auto& t : terms) j[t.name] = x.*(t.field);
  return j;
}
}  // namespace

PredictResult predict(const PredictRequest& q) { return predict(q, resolve(q.run)); }

PredictResult predict(const PredictRequest& q, const Resolved& resolved, bool name_in_warnings) {
  PredictResult res;
  res.r = resolved;
  res.s = io::parse_strategy(q.strategy, "--strategy", q.run.devices);
  res.emit = q.emit;
  res.allow_uneven = q.allow_uneven;
  res.train_tokens = q.train_tokens;
  const Resolved& r = res.r;
  const Strategy& s = res.s;
  if (config_name(s) != q.strategy && parse_config_name(q.strategy).strategy != s)
    spdlog::info("'{}' read as {}", q.strategy, config_name(s));
  if (q.run.devices && io::fold_moe_replicas(res.s, q.run.devices))
    spdlog::info(
        "'{}' read as LM-SimBench writes MoE runs, dp·tp·pp·cp·ep = {} devices: Megatron's data-parallel "
        "degree is dp·ep = {} ({})",
        q.strategy, q.run.devices, s.data_parallel, config_name(s));
  if (q.run.devices && q.run.devices != s.devices())
    throw io::InputError(
        "--strategy", 0, "",
        "'" + q.strategy + "' uses dp*tp*pp*cp = " + std::to_string(s.devices()) +
            (s.expert_parallel > 1 ? " (dp*tp*pp*cp*ep = " + std::to_string(s.devices() * s.expert_parallel) + ")"
                                   : std::string()) +
            " devices, --devices is " + std::to_string(q.run.devices));
  SimOptions so;
  so.validity = {r.system.devices_per_node, q.allow_cross_node, q.allow_uneven};
  res.p = simulate(r.model, s, r.system, r.settings, r.params, so);
  if (!res.p.ok()) {
    // Experts split over TP leave no room for this EP; whole experts on each rank (-etp1) may (MoE parallel folding).
    Strategy whole = s;
    whole.set_expert_tensor(1);
    const bool etp1 = res.p.rejection == Rejection::ep_not_dividing_dp_cp && s.expert_tensor_parallel == 0 &&
                      check(r.model, whole, r.settings, so.validity) == Rejection::ok;
    ValidityOptions uneven = so.validity;
    uneven.allow_uneven_layers = true;
    const bool uneven_runs = res.p.rejection == Rejection::layers_not_divisible_by_pp_vpp &&
                             !so.validity.allow_uneven_layers && check(r.model, s, r.settings, uneven) == Rejection::ok;
    throw io::InputError(
        "--strategy", 0, "",
        "'" + q.strategy + "' cannot run " + r.model.name + ": " +
            explain(res.p.rejection, r.model, s, r.settings, so.validity) +
            (etp1 ? "; expert tensor parallel = tp by default, " + config_name(whole) +
                        " keeps each expert whole on a rank and runs"
                  : std::string()) +
            (uneven_runs ? "; --allow-uneven-layers lets the first stages take one layer more" : std::string()));
  }
  res.mem = per_rank_peak_memory(res.p, s);
  if (res.p.feasible)
    res.partial = search::partial_recompute_alternative(r.model, s, r.system, r.settings, r.params, so);
  if (r.fit) {
    res.outside_fitted_range = outside_fitted_range(r.fit->range, range_values(r.model, s, r.settings));
    if (!res.outside_fitted_range.empty())
      spdlog::warn("{}outside the runs θ was fitted on: {}; the terms that scale with these extrapolate{}",
                   name_in_warnings ? config_name(s) + ": " : "", join(res.outside_fitted_range),
                   widening_said(r.uncertainty));
  }
  std::optional<calib::Uncertainty> u = r.uncertainty;
  if (u && r.fit) {  // calib::for_prediction's second step (resolve() took the model's): widened beyond the range
    const calib::PredictionUncertainty p = calib::for_prediction(*u, true, r.fit->range, r.model, s, r.settings);
    res.beyond_range_log_sq = p.beyond_range_log_sq;
    *u = p.u;
  }
  if (u)  // one sensitivity for the intervals, what they lean on and what their width is made of
    if (const auto ls = calib::log_sensitivity(r.model, s, r.system, r.settings, r.params, *u, so)) {
      res.iv = calib::intervals(*ls, *u);
      res.has_iv = true;
      res.p_fits =
          calib::p_fits(res.p.max_peak_memory_bytes, res.p.capacity_bytes, res.iv.memory_log_sd, u->memory_dof);
      if (res.partial)
        res.partial_p_fits = calib::p_fits(res.partial->prediction.max_peak_memory_bytes, res.p.capacity_bytes,
                                           res.iv.memory_log_sd, u->memory_dof);
      res.unfitted = calib::prior_leans(*u, *ls);
      res.time_sd_parts = calib::time_sd_parts(*r.uncertainty, *u, *ls);
      // Fitted parameters that make most of a wide interval: θ's runs pinned them for configurations like theirs,
      // not for this one (a B200 θ from two dense runs, asked of an MoE layer's small kernels and all-to-alls).
      res.loosely_fitted = calib::loosely_fitted(*u, *ls, res.time_sd_parts);
      res.elasticities = calib::time_elasticities(*u, *ls, r.params);
      if (!res.loosely_fitted.empty())
        spdlog::info(
            "{}the fitted parameters' ± {:.1f} % of the time's log sd come mostly from {}: θ's runs left "
            "them loose for a configuration like this one; runs like it would narrow the interval",
            name_in_warnings ? config_name(s) + ": " : "", 100 * res.time_sd_parts.fitted_parameters,
            calib::describe(res.loosely_fitted, r.params, 3));
      if (calib::time_from_priors(*u))  // every parameter is a prior: say which weigh most, not a warning each
        spdlog::info("the intervals come from θ's priors, mostly {}", calib::describe(res.unfitted, r.params, 3));
      else if (!res.unfitted.empty())
        spdlog::warn(
            "{}the time leans on parameters θ's runs never measured, held at their prior: {}; the intervals carry "
            "their priors' width",
            name_in_warnings ? config_name(s) + ": " : "", calib::describe(res.unfitted, r.params));
    }
  return res;
}

io::Json PredictResult::json() const {
  const Prediction& p = this->p;
  const calib::PredictionIntervals& iv = this->iv;
  io::Json j;
  j["model"] = r.model.name;
  j["system"] = r.system.name;
  j["strategy"] = config_name(s);
  j["devices"] = s.devices();
  j["settings"] = io::to_json(r.settings);
  j["params"] = io::to_json(r.params);
  j["params_source"] = r.params_source;
  if (r.fit) {
    auto num = [](double v) { return std::isfinite(v) ? io::Json(v) : io::Json(nullptr); };
    j["params_fitted_on"] = {{"models", r.fit->models},
                             {"includes_this_model", r.fit->includes_model},
                             {"same_architecture_as", r.fit->fitted_as},
                             {"in_sample_time_mape_pct", num(r.fit->in_sample_time_mape_pct)},
                             {"held_out_kind", r.fit->held_out_kind},
                             {"held_out_time_mape_pct", num(r.fit->held_out_time_mape_pct)}};
  }
  if (r.fit) {
    j["outside_fitted_range"] = outside_fitted_range;
    // How far outside, in e-folds (root of the summed squared log distances), which widens the intervals.
    j["beyond_fitted_range_log_distance"] = std::sqrt(beyond_range_log_sq);
  }
  if (r.uncertainty) {
    auto leans = [&](const std::vector<calib::PriorLean>& v, const char* sd_key) {
      io::Json a = io::Json::array();
      for (const auto& l : v)
        a.push_back({{"name", param_table()[l.param].name},
                     {"value", get(r.params, l.param)},
                     {sd_key, l.param_sd},
                     {"time_log_sd", l.time_log_sd}});
      return a;
    };
    j["unfitted_parameters"] = leans(unfitted, "prior_sd");
    j["loosely_fitted_parameters"] = leans(loosely_fitted, "sd");
    io::Json el = io::Json::array();
    for (const auto& e : elasticities)
      el.push_back({{"name", param_table()[e.param].name}, {"elasticity", e.value}, {"prior_only", e.prior_only}});
    j["time_elasticities"] = el;
  }
  if (r.uncertainty) {  // which residual scale the intervals carry (see resolve())
    j["interval_residual_scale"] = calib::time_from_priors(*r.uncertainty) ? "priors"
                                   : r.held_out_scale                      ? "held_out_models"
                                                                           : "fitted_runs";
    // No run calibrated θ (uncalibrated preset defaults): the time interval is the priors' (calib::prior_uncertainty).
    j["time_interval_from_priors"] = calib::time_from_priors(*r.uncertainty);
    // Without memory measurements in θ's fit, memory's interval is the priors' (calib::memory_from_priors).
    j["memory_interval_from_priors"] = calib::memory_from_priors(*r.uncertainty);
  }
  if (!emit.empty()) j["emit"] = emit_json(emit, emit_flags(emit, r.model, r.system, s, r.settings, allow_uneven));
  j["iteration_time_s"] = p.iteration_time_s;
  j["peak_memory_bytes"] = mem;
  j["max_peak_memory_bytes"] = p.max_peak_memory_bytes;
  j["capacity_bytes"] = p.capacity_bytes;
  j["feasible"] = p.feasible;
  j["p_fits"] = std::isfinite(p_fits) ? io::Json(p_fits) : io::Json(nullptr);
  j["partial_recompute_that_fits"] =
      partial ? io::Json{{"config_name", config_name(partial->strategy)},
                         {"iteration_time_s", partial->prediction.iteration_time_s},
                         {"max_peak_memory_bytes", partial->prediction.max_peak_memory_bytes},
                         {"p_fits", std::isfinite(partial_p_fits) ? io::Json(partial_p_fits) : io::Json(nullptr)}}
              : io::Json(nullptr);
  const Throughput tp = throughput(p, s, r.system, r.settings);
  j["model_tflops_per_device"] = tp.model_tflops_per_device;
  j["mfu"] = tp.mfu;
  j["tokens_per_s_per_device"] = tp.tokens_per_s_per_device;
  if (train_tokens > 0) {  // the whole run at this pace; its interval is the iteration's, every iteration alike
    const TrainingRun run = this->run();
    io::Json t{{"tokens", train_tokens},
               {"iterations", run.iterations},
               {"time_s", run.time_s},
               {"time_days", run.days()},
               {"device_hours", run.device_hours}};
    if (has_iv)
      for (const auto& end : calib::kIntervalEnds)
        t[std::string("time_days_") + end.percentile] = run.days_at(end.of(iv.*end.time));
    j["training_run"] = t;
  }
  if (has_iv) {  // where the time interval's width comes from: log sds whose squares add up to the total's
    const calib::TimeSdParts& tp = time_sd_parts;
    j["time_log_sd"] = iv.time_log_sd;
    j["time_log_sd_parts"] = {{"residual", tp.residual},
                              {"beyond_fitted_range", tp.beyond_range},
                              {"fitted_parameters", tp.fitted_parameters},
                              {"unfitted_priors", tp.unfitted_priors}};
  }
  if (has_iv)  // central 80 % and 90 % prediction intervals
    for (const auto& end : calib::kIntervalEnds) {
      j[std::string("iteration_time_s_") + end.percentile] = end.of(iv.*end.time);
      if (iv.memory_log_sd > 0) j[std::string("max_peak_memory_bytes_") + end.percentile] = end.of(iv.*end.memory);
    }
  j["num_micro_batches"] = p.num_micro_batches;
  j["breakdown"] = terms_json(p.breakdown, breakdown_terms());
  j["pipeline_split"] = to_string(p.pipeline_split);
  j["layer"] = {{"moe", p.layer.moe},
                {"forward_s", p.layer.forward_s},
                {"backward_s", p.layer.backward_s},
                {"recompute_s", p.layer.recompute_s},
                {"tp_comm_exposed_s", p.layer.tp_comm_exposed_s},
                {"tp_comm_hidden_s", p.layer.tp_comm_hidden_s}};
  io::Json stages = io::Json::array();
  for (int i = 0; i < p.num_stages; ++i) {
    const StageResult& st = p.stages[static_cast<std::size_t>(i)];
    io::Json sj = terms_json(st, stage_time_terms());
    sj["stage"] = i;
    sj["first_layer"] = st.first_layer;
    sj["num_layers"] = st.num_layers;
    sj["mtp_layers"] = st.mtp_layers;
    sj["memory"] = terms_json(st, stage_memory_terms());
    stages.push_back(sj);
  }
  j["stages"] = stages;
  io::Json gemms = io::Json::array();
  for (const auto& g : gemm_diagnostics(r.model, s, r.system, r.settings, r.params))
    gemms.push_back({{"name", g.name},
                     {"stage", g.stage},
                     {"batch", g.batch},
                     {"m", g.m},
                     {"n", g.n},
                     {"k", g.k},
                     {"dtype", to_string(g.dtype)},
                     {"count", g.count},
                     {"predicted_us", g.predicted_us}});
  j["gemms"] = gemms;
  io::Json colls = io::Json::array();
  for (const auto& c : collective_diagnostics(r.model, s, r.system, r.settings, r.params))
    colls.push_back({{"primitive", c.primitive},
                     {"group", c.group},
                     {"stage", c.stage},
                     {"group_size", c.group_size},
                     {"nodes", c.nodes},
                     {"link_share", c.link_share},
                     {"bytes", c.bytes},
                     {"count", c.count},
                     {"predicted_ms", c.predicted_ms},
                     {"protocol", c.protocol}});
  j["collectives"] = colls;
  return j;
}

}  // namespace lmsim::app
