// `lmsim search`: MPI + OpenMP sweep of a strategy space; ranking, Pareto front and feasibility counts to HDF5.
#include <mpi.h>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>
#include <limits>
#include <set>

#include "apps/common.hpp"
#include "apps/emit.hpp"
#include "search/checkpoint.hpp"
#include "search/records.hpp"
#include "search/search.hpp"

namespace lmsim::app {

namespace {

// The probability of fitting in memory that counts as sure: --rank-by risk ranks these first, and a point-objective
// first place below it is warned of.
constexpr double kSureFit = 0.9;

struct SearchCli {
  std::string model, out, objective = "time", stack, settings_file, checkpoint_dir, rank_by = "objective", emit;
  std::vector<std::string> set_settings;
  std::vector<std::string> systems, params, recompute, recompute_layers;
  std::vector<int> devices, tp, pp, cp, dp, ep, vpp;
  std::vector<std::int64_t> seq, gbs, mbs;
  std::vector<std::string> sp, distopt, fsdp, etp, cp_comm_type, flash_attention, moe_dispatcher;
  std::vector<std::string> vary;  // --vary KEY=V1,V2,...: training settings swept as scenario dimensions
  std::size_t top = 20;
  double memory_margin_gib = 2, checkpoint_every = 30;
  // --token-budget (the device-hours objective's tokens; 0: --train-tokens, else 1e12) and --train-tokens (each
  // ranked candidate's training run; 0: none).
  double token_budget = 0, train_tokens = 0;
  double max_days = 0;  // --max-days: a candidate whose --train-tokens run takes longer is rejected (0: none)
  std::uint64_t chunk = 0;
  bool json = false, write_all = false, resume = false, cross_node_tp = false, uneven = false, quiet = false;
};

// The settings keys search's --vary leaves to another option: layout fields every candidate sets itself, the sizes,
// and the settings search sweeps as scenarios with options of their own.
const std::vector<std::pair<std::string, std::string>> kSearchVaryElsewhere = {
    {"seq_length", "--seq"},
    {"global_batch_size", "--global-batch"},
    {"micro_batch_size", "--micro-batch"},
    {"sequence_parallel", "--sp"},
    {"distributed_optimizer", "--distributed-optimizer"},
    {"fsdp", "--fsdp"},
    {"cp_comm_type", "--cp-comm-type"},
    {"ulysses_degree_in_cp", "--cp-comm-type"},
    {"flash_attention", "--flash-attention"},
    {"moe_token_dispatcher_type", "--moe-dispatcher"},
};

std::vector<bool> bools(const std::vector<std::string>& v, const char* flag) {
  std::vector<bool> out;
  for (const auto& s : v) {
    if (s == "on" || s == "true" || s == "1")
      out.push_back(true);
    else if (s == "off" || s == "false" || s == "0")
      out.push_back(false);
    else
      throw io::InputError("command line", 0, flag, "'" + s + "' is not on or off");
  }
  return out;
}

// A ranked candidate's training run of `tokens` tokens at its predicted pace.
TrainingRun run_of(const search::Space& space, const search::Entry& e, double tokens) {
  const search::Candidate c = space.at(e.index);
  return training_run(e.time_s, c.strategy.devices(), space.scenarios()[c.scenario].settings, tokens);
}

// Risk of the ranked candidates (issue: calibration you can trust): present when the scenario's θ carries a
// covariance. Parameter uncertainty is shared between candidates on one θ, residual errors are not; beyond the
// fitted range (`ranges`, per scenario) each candidate's residual scale widens (calib::beyond_range), and two
// candidates on one θ share the extrapolation error of the distance they have in common.
std::vector<std::optional<calib::CandidateRisk>> ranking_risk(const Model& model, const search::Space& space,
                                                              const std::vector<search::Entry>& ranking,
                                                              const std::vector<std::optional<calib::Uncertainty>>& unc,
                                                              const std::vector<calib::FittedRange>& ranges,
                                                              const search::SweepOptions& o) {
  std::vector<std::optional<calib::LogSensitivity>> sens(ranking.size());
  std::vector<std::array<double, std::size(calib::kRangeDims)>> beyond(ranking.size());
  for (std::size_t i = 0; i < ranking.size(); ++i) {
    const auto c = space.at(ranking[i].index);
    const search::Scenario& s = space.scenarios()[c.scenario];
    if (!unc[c.scenario]) continue;
    const SimOptions so = search::scenario_sim_options(s, o);
    sens[i] = calib::log_sensitivity(model, c.strategy, s.system, s.settings, s.params, *unc[c.scenario], so);
    beyond[i] = calib::beyond_range_logs(ranges[c.scenario], model, c.strategy, s.settings);
  }
  std::vector<std::optional<calib::CandidateRisk>> out(ranking.size());
  if (ranking.empty() || !sens[0]) return out;
  const std::size_t s0 = space.at(ranking[0].index).scenario;
  auto sq = [](const auto& x) {
    double v = 0;
    for (double e : x) v += e * e;
    return v;
  };
  const calib::Uncertainty u0 = calib::beyond_range(*unc[s0], sq(beyond[0]));
  for (std::size_t i = 0; i < ranking.size(); ++i) {
    if (!sens[i]) continue;
    const std::size_t si = space.at(ranking[i].index).scenario;
    const calib::Uncertainty& base = *unc[si];
    const calib::Uncertainty u = calib::beyond_range(base, sq(beyond[i]));
    calib::CandidateRisk cr;
    const calib::LogSds sd = calib::total_log_sds(u, *sens[i]);
    cr.time_log_sd = sd.time;
    // The upper end of the central 80 % interval: the 90th percentile.
    cr.time_p90_s = ranking[i].time_s * std::exp(calib::central_quantile(0.8, u.time_dof) * cr.time_log_sd);
    const double cap = space.scenarios()[si].system.hbm_capacity_bytes - o.memory_margin_bytes;
    cr.p_fits = calib::p_fits(ranking[i].peak_bytes, cap, sd.memory, u.memory_dof);  // NaN without a memory scale
    if (o.max_run_days > 0) {  // every iteration errs alike: the run is in time when the iteration is
      const double gap = std::log(o.max_run_days / run_of(space, ranking[i], o.token_budget).days());
      cr.p_in_time = cr.time_log_sd > 0 ? calib::student_t_cdf(gap / cr.time_log_sd, u.time_dof) : (gap >= 0 ? 1 : 0);
    }
    if (i == 0) {
      cr.p_within_5pct = 1;
    } else {
      double v = 0, dof = u.time_dof;
      if (si == s0 || space.scenarios()[si].system.name == space.scenarios()[s0].system.name) {
        std::vector<double> d(sens[i]->g_time.size());
        for (std::size_t a = 0; a < d.size(); ++a) d[a] = sens[i]->g_time[a] - sens[0]->g_time[a];
        std::array<double, std::size(calib::kRangeDims)> apart{};
        for (std::size_t k = 0; k < apart.size(); ++k) apart[k] = beyond[i][k] - beyond[0][k];
        const double kappa = base.extrapolation_time_log_sd;
        v = calib::quad(base, d, d) + 2 * base.time_log_sd * base.time_log_sd + kappa * kappa * sq(apart);
        dof = calib::beyond_range(base, sq(apart)).time_dof;
      } else {
        const double sd0 = calib::total_log_sds(u0, *sens[0]).time;
        v = sd.time * sd.time + sd0 * sd0;
        if (u0.time_dof > 0) dof = dof > 0 ? std::min(dof, u0.time_dof) : u0.time_dof;  // the less certain of the two
      }
      const double gap = std::log(ranking[i].objective / ranking[0].objective) - std::log(1.05);
      cr.p_within_5pct = v > 0 ? calib::student_t_cdf(-gap / std::sqrt(v), dof) : (gap <= 0 ? 1.0 : 0.0);
    }
    out[i] = cr;
  }
  return out;
}

// The practitioners' figures of a ranked candidate (re-simulated: the sweep keeps only time and memory).
Throughput throughput_of(const Model& model, const search::Space& space, const search::Entry& e,
                         const search::SweepOptions& o) {
  const auto c = space.at(e.index);
  const search::Scenario& s = space.scenarios()[c.scenario];
  const SimOptions so = search::scenario_sim_options(s, o);
  return throughput(simulate(model, c.strategy, s.system, s.settings, s.params, so), c.strategy, s.system, s.settings);
}

// With --train-tokens, a candidate's training run in its JSON row and its text row (days; device-hours unless the
// device-hours objective's own column shows them), and the text header's names for those cells.
void add_run_json(io::Json& row, const search::Space& space, const search::Entry& e, double tokens) {
  if (!(tokens > 0)) return;
  const TrainingRun run = run_of(space, e, tokens);
  row["training_days"] = run.days();
  row["training_device_hours"] = run.device_hours;
}
void add_run_cells(std::vector<std::string>& row, const search::Space& space, const search::Entry& e, double tokens,
                   search::Objective obj) {
  if (!(tokens > 0)) return;
  const TrainingRun run = run_of(space, e, tokens);
  row.push_back(fmt(run.days(), 2));
  if (obj != search::Objective::device_hours) row.push_back(grouped(run.device_hours));
}
void add_run_head(std::vector<std::string>& head, double tokens, search::Objective obj) {
  if (!(tokens > 0)) return;
  head.push_back("days");
  if (obj != search::Objective::device_hours) head.push_back("device-hours");
}

// The objective as its name says: the sweep minimises device-seconds per token for the tokens objective, the
// user reads tokens per second per device.
double objective_shown(search::Objective obj, double value) {
  return obj == search::Objective::tokens_per_device && value > 0 ? 1.0 / value : value;
}
// The same as a table cell: tokens per second per device to a tenth, device-hours whole (grouped) from a thousand.
std::string objective_cell(search::Objective obj, double value) {
  const double v = objective_shown(obj, value);
  if (obj == search::Objective::device_hours && v >= 1000) return grouped(v);
  return fmt(v, obj == search::Objective::tokens_per_device ? 1 : 2);
}

io::Json nothing_fits_json(const search::NothingFits& w, const std::vector<search::Scenario>& scen) {
  io::Json j;
  if (w.closest) {
    j["closest_index"] = w.closest->index;
    j["closest_max_peak_memory_bytes"] = w.closest->peak_bytes;
    j["lacking_bytes"] = w.lacking_bytes;
  } else if (w.commonest != Rejection::ok) {  // no candidate can run at all
    j["commonest_rejection"] = to_string(w.commonest);
    j["commonest_rejection_index"] = w.commonest_example;
  }
  io::Json larger = io::Json::array();
  for (const auto& l : w.larger)
    larger.push_back({{"scenario", scen[l.scenario].label},
                      {"smallest_devices_that_fit", l.devices ? io::Json(l.devices) : io::Json(nullptr)},
                      {"example", l.example ? io::Json(config_name(*l.example)) : io::Json(nullptr)}});
  j["larger_jobs"] = larger;
  return j;
}

std::string nothing_fits_text(const search::NothingFits& w, const search::Space& space,
                              const std::vector<search::Scenario>& scen, const search::SweepOptions& o) {
  std::string t;
  if (!w.closest && w.commonest != Rejection::ok) {  // no candidate can run, whatever the memory
    const auto c = space.at(w.commonest_example);
    const search::Scenario& s = scen[c.scenario];
    t += "no candidate can run; the rule broken most often is " + std::string(to_string(w.commonest)) + ", e.g. " +
         config_name(c.strategy) + " on " + s.label + ": " +
         explain(w.commonest, space.model(), c.strategy, s.settings, search::scenario_sim_options(s, o).validity) +
         ".\n";
  } else {
    t = "nothing fits in memory";
    if (o.memory_margin_bytes > 0) t += " (keeping " + fmt(o.memory_margin_bytes / 1073741824.0, 1) + " GiB free)";
    t += ".\n";
  }
  if (w.closest) {
    const auto c = space.at(w.closest->index);
    t += "closest: " + config_name(c.strategy) + " on " + scen[c.scenario].label + " needs " +
         gib(w.closest->peak_bytes) + " GiB per device, " + fmt(w.lacking_bytes / 1073741824.0, 2) +
         " GiB more than it may use.\n";
  }
  for (const auto& l : w.larger)
    t += scen[l.scenario].label + ": " +
         (l.devices ? "fits from " + std::to_string(l.devices) + " devices (e.g. " + config_name(*l.example) + ")"
                    : std::string("nothing fits up to 32x the devices")) +
         "\n";
  return t;
}

void write_results(const std::string& file, const search::Space& space, const search::SweepResult& r,
                   const search::SweepOptions& o, const io::Json& provenance,
                   const std::vector<std::optional<calib::CandidateRisk>>& risk, double train_tokens) {
  io::H5Writer w(file);
  auto table_of = [&](const std::string& g, const std::vector<search::Entry>& es, bool full) {
    std::vector<std::string> names, scen;
    std::vector<std::int64_t> idx;
    search::StrategyColumns<std::int64_t, bool> strat;
    std::vector<double> t, mem, obj, run_days, run_device_hours;
    std::array<std::vector<double>, kNumBreakdownTerms> terms;
    for (const auto& e : es) {
      const search::Candidate c = space.at(e.index);
      const search::Scenario& s = space.scenarios()[c.scenario];
      names.push_back(config_name(c.strategy));
      scen.push_back(s.label);
      strat.add(c.strategy, s.settings);
      idx.push_back(static_cast<std::int64_t>(e.index));
      t.push_back(e.time_s);
      mem.push_back(e.peak_bytes);
      obj.push_back(e.objective);
      if (train_tokens > 0) {
        const TrainingRun run = run_of(space, e, train_tokens);
        run_days.push_back(run.days());
        run_device_hours.push_back(run.device_hours);
      }
      if (full) {
        const Prediction p =
            simulate(space.model(), c.strategy, s.system, s.settings, s.params, search::scenario_sim_options(s, o));
        for (std::size_t k = 0; k < kNumBreakdownTerms; ++k)
          terms[k].push_back(p.breakdown.*(breakdown_terms()[k].field));
      }
    }
    w.group(g);
    w.write(g + "/config_name", names);
    w.write(g + "/scenario", scen);
    w.write(g + "/index", idx);
    w.write(g + "/dp", strat.dp);
    w.write(g + "/tp", strat.tp);
    w.write(g + "/pp", strat.pp);
    w.write(g + "/cp", strat.cp);
    w.write(g + "/ep", strat.ep);
    w.write(g + "/etp", strat.etp);
    w.write(g + "/vpp", strat.vpp);
    w.write(g + "/micro_batch_size", strat.micro_batch_size);
    w.write_bools(g + "/sequence_parallel", strat.sequence_parallel);
    w.write_bools(g + "/distributed_optimizer", strat.distributed_optimizer);
    w.write_bools(g + "/fsdp", strat.fsdp);
    std::vector<std::string> cpc;
    for (CpCommType c : strat.cp_comm_type) cpc.push_back(to_string(c));
    w.write(g + "/cp_comm_type", cpc);
    w.write(g + "/ulysses_degree", strat.ulysses_degree);
    std::vector<std::string> rc;
    for (Recompute r : strat.recompute) rc.push_back(to_string(r));
    w.write(g + "/recompute", rc);
    w.write(g + "/recompute_num_layers", strat.recompute_num_layers);
    w.write(g + "/iteration_time_s", t);
    w.write(g + "/max_peak_memory_bytes", mem);
    w.write(g + "/objective", obj);
    if (train_tokens > 0) {  // each candidate's training run of --train-tokens tokens
      w.write(g + "/training_days", run_days);
      w.write(g + "/training_device_hours", run_device_hours);
    }
    if (full) {
      for (std::size_t k = 0; k < kNumBreakdownTerms; ++k) {
        const auto& term = breakdown_terms()[k];
        w.write(g + "/breakdown/" + term.name, terms[k]);
        w.attr(g + "/breakdown/" + term.name, "kind", std::string(to_string(term.kind)));
        w.attr(g + "/breakdown/" + term.name, "doc", std::string(term.doc));
      }
      std::vector<double> mfu, tflops, tokens;
      for (const auto& e : es) {
        const Throughput tp = throughput_of(space.model(), space, e, o);
        mfu.push_back(tp.mfu);
        tflops.push_back(tp.model_tflops_per_device);
        tokens.push_back(tp.tokens_per_s_per_device);
      }
      w.write(g + "/mfu", mfu);
      w.write(g + "/model_tflops_per_device", tflops);
      w.write(g + "/tokens_per_s_per_device", tokens);
      if (!risk.empty() && risk[0]) {  // NaN where a candidate's θ has no covariance
        std::vector<double> pf, pw, t90, pt;
        for (const auto& x : risk) {
          pf.push_back(x ? x->p_fits : std::nan(""));
          pw.push_back(x ? x->p_within_5pct : std::nan(""));
          t90.push_back(x ? x->time_p90_s : std::nan(""));
          pt.push_back(x ? x->p_in_time : std::nan(""));
        }
        w.write(g + "/p_fits", pf);
        w.write(g + "/p_within_5pct_of_best", pw);
        w.write(g + "/iteration_time_s_p90", t90);
        if (o.max_run_days > 0) w.write(g + "/p_in_time", pt);
      }
    }
  };
  table_of("/ranking", r.ranking, true);
  w.attr("/ranking", "objective", std::string(search::to_string(o.objective)));
  table_of("/pareto", r.pareto, false);
  std::vector<search::Entry> best;
  for (const auto& b : r.best_per_scenario)
    if (b) best.push_back(*b);
  table_of("/best_per_scenario", best, false);
  std::vector<std::string> reasons;
  std::vector<std::int64_t> counts;
  for (std::size_t i = 0; i < search::kReasons; ++i) {
    if (i != 0 && i != search::kExceedsMemory && r.rejections[i] == 0) continue;
    reasons.push_back(search::reason_name(i));
    counts.push_back(static_cast<std::int64_t>(r.rejections[i]));
  }
  w.write("/feasibility/reason", reasons);
  w.write("/feasibility/count", counts);
  if (o.write_all) search::write_all_records(w, space, o.checkpoint_dir, r.chunk);
  w.group("/provenance");
  w.attr("/provenance", "json", provenance.dump());
  std::vector<std::string> theta_files;
  for (const auto& s : provenance["scenarios"])
    if (s.contains("params_file") && !s["params_file"].get<std::string>().empty() &&
        std::find(theta_files.begin(), theta_files.end(), s["params_file"].get<std::string>()) == theta_files.end())
      theta_files.push_back(s["params_file"].get<std::string>());
  write_provenance(w, "/provenance", theta_files);
  w.attr("/provenance", "ranks", static_cast<std::int64_t>(r.ranks));
  w.attr("/provenance", "threads", static_cast<std::int64_t>(r.threads));
  w.attr("/provenance", "wall_s", r.wall_s);
  w.attr("/provenance", "space_size", static_cast<std::int64_t>(space.size()));
  w.attr("/provenance", "evaluated", static_cast<std::int64_t>(r.evaluated));
  w.commit();
}

// One search: the command line's options in, the report on `out` (results to --out).
void run(SearchCli sc, std::ostream& out) {
  if (sc.quiet && spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Every rank resolves the same model, θ and settings, so their notes and warnings are rank 0's to say; a rank's
  // own failure still reaches the user (an exception, reported with its rank by run_cli).
  if (rank != 0 && spdlog::get_level() < spdlog::level::err) spdlog::set_level(spdlog::level::err);
  if (sc.systems.empty()) throw io::InputError("command line", 0, "--system", "at least one system is required");
  if (!sc.params.empty() && sc.params.size() != sc.systems.size())
    throw io::InputError("command line", 0, "--params", "give one θ file per --system, in the same order");
  if (sc.write_all && sc.out.empty())
    throw io::InputError("command line", 0, "--write-all", "needs --out: the records go into its HDF5 file");
  const Model model = io::resolve_model(sc.model);
  std::vector<search::Scenario> scen;
  std::vector<std::optional<calib::Uncertainty>> unc;  // per scenario: its θ's covariance, when known
  std::vector<std::string> theta_file;                 // per scenario: the θ file read (empty: preset defaults)
  std::vector<calib::FittedRange> ranges;              // per scenario: its θ's fitted runs' range (empty: unknown)
  search::SettingSweep sweep;
  sweep.flash_attention = bools(sc.flash_attention, "--flash-attention");
  const bool flash_on =
      std::find(sweep.flash_attention.begin(), sweep.flash_attention.end(), true) != sweep.flash_attention.end();
  for (const auto& name : sc.moe_dispatcher) {
    const auto d = from_name<MoeDispatcher>(name, kNumMoeDispatchers);
    if (!d)
      throw io::InputError("command line", 0, "--moe-dispatcher",
                           "'" + name + "' is not one of " + names_of<MoeDispatcher>(kNumMoeDispatchers));
    sweep.moe_dispatcher.push_back(*d);
  }
  if (!sweep.moe_dispatcher.empty() && !model.is_moe())
    throw io::InputError("command line", 0, "--moe-dispatcher", model.name + " has no experts to dispatch to");
  const std::vector<std::vector<std::string>> combos =
      combinations(varied_settings(sc.vary, sc.set_settings, kSearchVaryElsewhere));
  for (std::size_t si = 0; si < sc.systems.size(); ++si) {
    RunOptions ro;
    ro.model = sc.model;
    ro.system = sc.systems[si];
    ro.params_file = sc.params.empty() ? "" : sc.params[si];
    ro.settings_file = sc.settings_file;
    ro.set_settings = sc.set_settings;
    ro.platform_stack = sc.stack;
    const Resolved base = resolve(ro);
    const std::size_t first = scen.size();
    for (const std::vector<std::string>& combo : combos) {
      TrainingSettings settings = base.settings;
      std::string suffix;  // the scenario label's /KEY=VALUE parts
      if (!combo.empty()) {
        // A precision (or FP8 recipe) this system has no units for is another system's scenario (--system
        // a100,h100 --vary precision=bf16,fp8): left out here, said; every other conflict is the user's to resolve.
        const io::Json asked = settings_of_set(combo, "--vary");
        const TrainingSettings v = io::settings_from_json(asked, "--vary", "", base.settings, false);
        if (asked.contains("precision") || asked.contains("fp8_recipe"))
          if (const std::string why = precision_unsupported(base.system, v); !why.empty()) {
            if (rank == 0) spdlog::warn("--vary: {} left out on {}: it {}", join(combo), base.system.name, why);
            continue;
          }
        settings = resolve_varied_settings(ro, combo, base.system);
        for (const std::string& pair : combo) suffix += "/" + pair;
      }
      try {
        for (auto& s : search::scenarios_of(base.system, base.params, settings, sc.devices, sc.seq, sc.gbs, sweep)) {
          s.label += suffix;
          scen.push_back(std::move(s));
        }
      } catch (const std::invalid_argument& e) {
        throw io::InputError("command line", 0, "--devices/--seq/--global-batch", e.what());
      }
    }
    if (scen.size() == first)
      throw io::InputError("command line", 0, "--vary", base.system.name + " can run none of the varied settings");
    if (flash_on && !base.system.fused_attention && rank == 0)
      spdlog::warn("--flash-attention on: {} {}", base.system.name, no_fused_attention(base.system));
    // Scenarios beyond the runs θ was fitted on (sequence length, device count): said once per system, on rank 0.
    if (base.fit && rank == 0) {
      std::vector<std::vector<std::pair<std::string, double>>> runs;
      for (std::size_t i = first; i < scen.size(); ++i)
        runs.push_back({{"seq_length", double(scen[i].settings.seq_length)},
                        {"devices", double(scen[i].devices)},
                        {"hidden_size", double(base.model.hidden_size)}});
      const std::vector<std::string> outside = outside_fitted_range(base.fit->range, runs);
      if (!outside.empty())
        spdlog::warn("{}: scenarios outside the runs θ was fitted on: {}; predictions there extrapolate{}",
                     base.system.name, join(outside), widening_said(base.uncertainty));
    }
    unc.resize(scen.size(), base.uncertainty);
    ranges.resize(scen.size(), base.fit ? base.fit->range : calib::FittedRange{});
    theta_file.resize(scen.size(), base.params_file);
  }
  auto positive = [](const auto& list, const char* flag) {
    for (auto v : list)
      if (v <= 0) throw io::InputError("command line", 0, flag, std::to_string(v) + " is not a positive integer");
  };
  positive(sc.dp, "--dp");
  positive(sc.tp, "--tp");
  positive(sc.pp, "--pp");
  positive(sc.cp, "--cp");
  positive(sc.ep, "--ep");
  positive(sc.vpp, "--vpp");
  positive(sc.mbs, "--micro-batch");
  search::SpaceFilter f;
  f.dp = sc.dp;
  f.tp = sc.tp;
  f.pp = sc.pp;
  f.cp = sc.cp;
  f.ep = sc.ep;
  for (const auto& e : sc.etp) {  // `tp` (the experts follow the attention's TP) or a positive degree
    if (e == "tp") {
      f.etp.push_back(0);
      continue;
    }
    int v = 0;
    const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
    if (ec != std::errc() || end != e.data() + e.size() || v <= 0)
      throw io::InputError("command line", 0, "--etp", "'" + e + "' is neither tp nor a positive integer");
    f.etp.push_back(v);
  }
  f.vpp = sc.vpp;
  f.micro_batch = sc.mbs;
  if (!sc.recompute.empty()) {
    f.recompute.clear();
    for (const auto& r : sc.recompute) {
      // Spelled as in configuration names (noRC, selRC, RC) or as Megatron's flags (none, selective, full).
      if (r == "none" || r == "noRC")
        f.recompute.push_back(Recompute::none);
      else if (r == "selective" || r == "selRC")
        f.recompute.push_back(Recompute::selective);
      else if (r == "full" || r == "RC")
        f.recompute.push_back(Recompute::full);
      else
        throw io::InputError("command line", 0, "--recompute",
                             "'" + r + "' is not none|noRC, selective|selRC or full|RC");
    }
  }
  for (const auto& e : sc.recompute_layers) {  // `all`, or layer counts
    if (e == "all") {
      for (std::int64_t n = 1; n < model.num_layers; ++n) f.recompute_layers.push_back(static_cast<int>(n));
      continue;
    }
    int v = 0;
    const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), v);
    if (ec != std::errc() || end != e.data() + e.size() || v <= 0)
      throw io::InputError("command line", 0, "--recompute-layers",
                           "'" + e + "' is neither all nor a positive number of layers");
    f.recompute_layers.push_back(v);
  }
  if (!sc.sp.empty()) f.sequence_parallel = bools(sc.sp, "--sp");
  if (!sc.distopt.empty()) f.distributed_optimizer = bools(sc.distopt, "--distributed-optimizer");
  if (!sc.fsdp.empty()) f.fsdp = bools(sc.fsdp, "--fsdp");
  for (const auto& name : sc.cp_comm_type) {
    const auto c = io::parse_cp_comm_type(name);
    if (!c) throw io::InputError("command line", 0, "--cp-comm-type", io::cp_comm_type_problem(name));
    if (std::find(f.cp_comm_type.begin(), f.cp_comm_type.end(), *c) == f.cp_comm_type.end())
      f.cp_comm_type.push_back(*c);
  }
  const search::Space space(model, scen, f);
  if (space.size() == 0) {  // say what was restricted against which device counts
    auto words = [](const auto& ints) {
      std::vector<std::string> w;
      for (const int v : ints) w.push_back(std::to_string(v));
      return join(w);
    };
    std::set<int> devices;
    for (const auto& x : scen) devices.insert(x.devices);
    std::string given;
    const std::pair<const char*, const std::vector<int>*> restrictions[] = {
        {"--dp", &sc.dp}, {"--tp", &sc.tp}, {"--pp", &sc.pp}, {"--cp", &sc.cp}, {"--ep", &sc.ep}};
    for (const auto& [flag, v] : restrictions)
      if (!v->empty()) given += std::string(given.empty() ? "" : "; ") + flag + " " + words(*v);
    throw io::InputError("command line", 0, "",
                         "the restricted strategy space is empty: no layout with " +
                             (given.empty() ? std::string("these restrictions") : given) + " is valid for " +
                             words(devices) + " devices and the model's heads and layers");
  }
  search::SweepOptions o;
  // The risk-aware order prefers candidates that fit with P >= 0.9, which may lie past the point objective's top:
  // the sweep keeps a wider pool, re-ranked and cut to --top below.
  const std::size_t risk_pool = std::max<std::size_t>(20 * sc.top, 1000);
  o.top_k = sc.rank_by == "risk" ? risk_pool : sc.top;
  o.objective = sc.objective == "time"     ? search::Objective::time
                : sc.objective == "tokens" ? search::Objective::tokens_per_device
                                           : search::Objective::device_hours;
  if (sc.token_budget > 0 && sc.train_tokens > 0 && sc.token_budget != sc.train_tokens)
    throw io::InputError("--token-budget", 0, "",
                         "differs from --train-tokens (give one: --train-tokens is also the device-hours objective's "
                         "budget)");
  o.token_budget = sc.token_budget > 0 ? sc.token_budget : sc.train_tokens > 0 ? sc.train_tokens : 1e12;
  if (sc.max_days > 0 && sc.train_tokens <= 0)
    throw io::InputError("--max-days", 0, "", "needs --train-tokens: the run whose days it bounds");
  o.max_run_days = sc.max_days;
  o.memory_margin_bytes = sc.memory_margin_gib * 1073741824.0;
  o.validity.allow_cross_node_tp = sc.cross_node_tp;
  o.validity.allow_uneven_layers = sc.uneven;
  o.chunk = sc.chunk;
  o.write_all = sc.write_all;
  o.checkpoint_dir = sc.checkpoint_dir.empty() && !sc.out.empty() ? sc.out + ".ckpt" : sc.checkpoint_dir;
  o.checkpoint_every_s = sc.checkpoint_every;
  o.resume = sc.resume;
  o.progress = !sc.quiet && !sc.json;
  if (rank == 0)
    spdlog::info(
        "search: {} over {} scenario(s), {} candidates, {} rank(s) x {} thread(s)", model.name, scen.size(),
        space.size(),
        [] {
          int n;
          MPI_Comm_size(MPI_COMM_WORLD, &n);
          return n;
        }(),
        omp_get_max_threads());
  if (!sc.out.empty()) io::check_output_ahead(sc.out, "--out");  // before hours of sweeping, not after
  search::install_stop_handlers();
  search::SweepResult r = search::sweep(space, o);
  // No even pipeline split fits: Megatron's uneven first/last stages may (Llama-3.1-405B's 126 layers on pp8).
  int retry = rank == 0 && r.feasible == 0 && !r.interrupted && !o.validity.allow_uneven_layers &&
              r.rejections[static_cast<std::size_t>(Rejection::layers_not_divisible_by_pp_vpp)] > 0;
  MPI_Bcast(&retry, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (retry) {
    if (rank == 0)
      spdlog::warn(
          "search: nothing fits with even pipeline stages; searching again with uneven stages "
          "(--allow-uneven-layers: the first stages take the extra layers)");
    o.validity.allow_uneven_layers = sc.uneven = true;
    o.resume = false;
    r = search::sweep(space, o);
  }
  if (rank != 0) return;
  if (r.resumed_chunks > 0)
    spdlog::info("search: resumed {} completed chunks from {}", r.resumed_chunks, o.checkpoint_dir);
  if (r.interrupted) {
    std::cerr << "lmsim: search interrupted; checkpoint in " << o.checkpoint_dir << ", continue with --resume\n";
    throw io::InputError(sc.out, 0, "", "interrupted before completion: no result written");
  }
  std::optional<search::NothingFits> why;
  // Candidates that fit but run too long: the shortest run says how far the deadline is; else why nothing fits.
  std::optional<search::Entry> shortest;
  if (r.feasible == 0 && r.rejections[search::kExceedsDeadline] > 0)
    shortest = search::shortest_run(space, o);
  else if (r.feasible == 0)
    why = search::explain_nothing_fits(space, f, o);
  io::Json prov{{"model", model.name},
                {"objective", search::to_string(o.objective)},
                {"token_budget", o.token_budget},
                {"train_tokens", sc.train_tokens},
                {"max_days", sc.max_days},
                {"top_k", sc.top},
                {"memory_margin_gib", sc.memory_margin_gib},
                {"scenarios", io::Json::array()}};
  for (std::size_t si = 0; si < scen.size(); ++si) {
    const auto& s = scen[si];
    prov["scenarios"].push_back({{"label", s.label},
                                 {"params_file", theta_file[si]},
                                 {"system", s.system.name},
                                 {"devices", s.devices},
                                 {"hbm_capacity_bytes", s.system.hbm_capacity_bytes},
                                 {"settings", io::to_json(s.settings)},
                                 {"params", io::to_json(s.params)}});
  }
  auto risk = ranking_risk(model, space, r.ranking, unc, ranges, o);
  if (sc.rank_by == "risk") {
    // Risk-aware order: candidates that fit with probability >= 0.9 first, each group by the 90th percentile of
    // its objective (objective x the time's 90th-percentile / point ratio); candidates without a covariance keep their
    // point order at the end.
    std::vector<std::size_t> order(r.ranking.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    auto key = [&](std::size_t i) {
      if (!risk[i]) return std::make_pair(2, r.ranking[i].objective);
      const bool sure = (std::isnan(risk[i]->p_fits) || risk[i]->p_fits >= kSureFit) &&
                        (std::isnan(risk[i]->p_in_time) || risk[i]->p_in_time >= kSureFit);
      return std::make_pair(sure ? 0 : 1, r.ranking[i].objective * (risk[i]->time_p90_s / r.ranking[i].time_s));
    };
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
    std::size_t sure = 0;
    for (auto i : order) sure += key(i).first == 0;
    prov["risk_pool"] = {{"candidates", r.ranking.size()}, {"fit_with_p_0_9", sure}};
    if (sure < sc.top && r.ranking.size() == o.top_k)
      spdlog::warn(
          "search: only {} of the {} best candidates by the point objective fit with P(fits) >= 0.9{}; candidates "
          "further down were not weighed (the pool is 20 x --top, at least 1000: a larger --top weighs more)",
          sure, r.ranking.size(), o.max_run_days > 0 ? " and finish in time with P >= 0.9" : "");
    std::vector<search::Entry> ranked;
    for (auto i : order)
      if (ranked.size() < sc.top) ranked.push_back(r.ranking[i]);
    r.ranking = ranked;
    risk = ranking_risk(model, space, r.ranking, unc, ranges, o);  // P(within 5 %) is relative to the new first
  }
  // Ranked by the point objective, the first may be a coin flip on memory: said, with the first listed candidate
  // that fits with P(fits) >= 0.9.
  const auto sure_fit = [&](std::size_t i) {
    return risk[i] && !std::isnan(risk[i]->p_fits) && risk[i]->p_fits >= kSureFit;
  };
  if (sc.rank_by != "risk" && !r.ranking.empty() && risk[0] && !std::isnan(risk[0]->p_fits) && !sure_fit(0)) {
    std::string alternative = "none of the listed candidates does";
    for (std::size_t i = 1; i < r.ranking.size(); ++i)
      if (sure_fit(i)) {
        alternative = fmt::format("the first listed that does is #{}, {} ({:.3f} s, {:+.1f} %)", i + 1,
                                  config_name(space.at(r.ranking[i].index).strategy), r.ranking[i].time_s,
                                  100 * (r.ranking[i].time_s / r.ranking[0].time_s - 1));
        break;
      }
    const auto best = space.at(r.ranking[0].index);
    spdlog::warn(
        "search: the best candidate, {}, fits in memory with P(fits) {:.2f} only ({:.2f} of {:.2f} GiB predicted); "
        "{}; --rank-by risk puts the candidates that fit with P(fits) >= 0.9 first",
        config_name(best.strategy), risk[0]->p_fits, r.ranking[0].peak_bytes / 1073741824.0,
        space.scenarios()[best.scenario].system.hbm_capacity_bytes / 1073741824.0, alternative);
  }
  // A first place that recomputes every layer may not need to: the fewest block-recomputed layers that still fit
  // (unless the space swept partial recompute itself).
  io::Json partial = nullptr;
  if (sc.recompute_layers.empty() && !r.ranking.empty()) {
    const auto best = space.at(r.ranking[0].index);
    const search::Scenario& bs = space.scenarios()[best.scenario];
    const SimOptions so = search::scenario_sim_options(bs, o);  // fits as the sweep's candidates fit
    if (const auto alt =
            search::partial_recompute_alternative(model, best.strategy, bs.system, bs.settings, bs.params, so)) {
      const double t = alt->prediction.iteration_time_s;
      spdlog::info(
          "search: the best candidate, {}, recomputes every layer; {} ({}) still fits ({:.2f} GiB) and runs in "
          "{:.3f} s ({:+.1f} %); --recompute-layers sweeps partial recompute",
          config_name(best.strategy), config_name(alt->strategy), search::partial_recompute_phrase(alt->strategy),
          alt->prediction.max_peak_memory_bytes / 1073741824.0, t, 100 * (t / r.ranking[0].time_s - 1));
      partial = {{"config_name", config_name(alt->strategy)},
                 {"iteration_time_s", t},
                 {"max_peak_memory_bytes", alt->prediction.max_peak_memory_bytes}};
    }
  }
  prov["partial_recompute_of_best"] = partial;
  // Whether the best candidate owes its place to a parameter θ's runs never measured (flash attention's efficiency
  // on a θ fitted on runs that stored their scores, say): said, and kept with the results.
  io::Json leans = io::Json::array(), loose = io::Json::array(), bound = io::Json::array();
  bool flash_from_cp = false;
  if (!r.ranking.empty()) {
    const auto c = space.at(r.ranking[0].index);
    const search::Scenario& s = space.scenarios()[c.scenario];
    // A stack whose context parallelism turns flash attention on (MindSpeed-LLM: flash_attention_with_cp) while
    // its runs without CP store the scores: a first place with cp > 1 may owe it to the flash kernel, not to CP.
    // Said, so the user can weigh flash attention at cp 1 as well.
    flash_from_cp = s.settings.flash_only_through_cp(c.strategy.context_parallel);
    if (flash_from_cp)
      spdlog::info(
          "search: the best candidate, {}, runs flash attention only because its context parallelism turns it on "
          "(flash_attention_with_cp, as MindSpeed-LLM does with cp > 1); these settings store the s x s scores "
          "without CP. {}",
          config_name(c.strategy),
          flash_on ? "It beat the --flash-attention on scenarios, which run flash attention at every cp"
                   : "To weigh flash attention without CP as well, search again with --flash-attention on,off "
                     "(or --set flash_attention=true)");
    if (unc[c.scenario]) {
      const SimOptions so = search::scenario_sim_options(s, o);
      if (const auto ls =
              calib::log_sensitivity(model, c.strategy, s.system, s.settings, s.params, *unc[c.scenario], so)) {
        const auto l = calib::prior_leans(*unc[c.scenario], *ls);
        for (const auto& x : l)
          leans.push_back({{"name", param_table()[x.param].name}, {"time_log_sd", x.time_log_sd}});
        if (!l.empty() && calib::time_from_priors(*unc[c.scenario]))  // uncalibrated: every parameter is a prior
          spdlog::info("search: the best candidate's interval, {}, comes from θ's priors, mostly {}",
                       config_name(c.strategy), calib::describe(l, s.params, 3));
        else if (!l.empty())
          spdlog::warn(
              "search: the best candidate, {}, leans on parameters θ's runs never measured, held at their prior: {}; "
              "its interval and the others' P(within 5 %) carry their priors' width",
              config_name(c.strategy), calib::describe(l, s.params));
        const calib::Uncertainty& base = *unc[c.scenario];
        const calib::TimeSdParts parts = calib::time_sd_parts(base, base, *ls);
        for (const auto& e : calib::time_elasticities(base, *ls, s.params))
          bound.push_back({{"name", param_table()[e.param].name}, {"elasticity", e.value}});
        const auto lf = calib::loosely_fitted(base, *ls, parts);
        for (const auto& x : lf)
          loose.push_back({{"name", param_table()[x.param].name}, {"time_log_sd", x.time_log_sd}});
        if (!lf.empty())
          spdlog::info(
              "search: the best candidate's interval, {}, comes mostly from fitted parameters θ's runs "
              "left loose for it (± {:.1f} % of its time's log sd): {}",
              config_name(c.strategy), 100 * parts.fitted_parameters, calib::describe(lf, s.params, 3));
      }
    }
  }
  prov["best_leans_on_unfitted"] = leans;
  prov["best_loosely_fitted"] = loose;
  prov["best_time_elasticities"] = bound;  // what bounds the best candidate (predict --diagnostics' table)
  prov["best_flash_attention_from_cp"] = flash_from_cp;
  prov["rank_by"] = sc.rank_by;
  prov["allow_uneven_layers"] = o.validity.allow_uneven_layers;
  if (!sc.out.empty()) {
    try {
      write_results(sc.out, space, r, o, prov, risk, sc.train_tokens);
    } catch (const io::InputError&) {
      std::cerr << "lmsim: the evaluated search is checkpointed in " << o.checkpoint_dir
                << "; fix the output and rerun with --resume to write it without evaluating again\n";
      throw;
    }
    search::remove_checkpoints(o.checkpoint_dir);
  }
  const double rate = static_cast<double>(r.evaluated) / std::max(r.wall_s, 1e-9);
  if (sc.json) {
    io::Json j = prov;
    j["space_size"] = space.size();
    j["evaluated"] = r.evaluated;
    j["feasible"] = r.feasible;
    j["wall_s"] = r.wall_s;
    j["configurations_per_s"] = rate;
    j["ranks"] = r.ranks;
    j["threads"] = r.threads;
    io::Json rej = io::Json::object();
    for (std::size_t i = 1; i < search::kReasons; ++i)
      if (r.rejections[i]) rej[search::reason_name(i)] = r.rejections[i];
    j["rejections"] = rej;
    io::Json rk = io::Json::array();
    for (std::size_t i = 0; i < r.ranking.size(); ++i) {
      const auto& e = r.ranking[i];
      const auto c = space.at(e.index);
      const Throughput tp = throughput_of(model, space, e, o);
      io::Json row{{"config_name", config_name(c.strategy)},
                   {"scenario", space.scenarios()[c.scenario].label},
                   {"iteration_time_s", e.time_s},
                   {"max_peak_memory_bytes", e.peak_bytes},
                   {"objective", e.objective},
                   {"mfu", tp.mfu},
                   {"model_tflops_per_device", tp.model_tflops_per_device},
                   {"tokens_per_s_per_device", tp.tokens_per_s_per_device}};
      add_run_json(row, space, e, sc.train_tokens);
      if (risk[i]) {
        row["p_fits"] = std::isnan(risk[i]->p_fits) ? io::Json(nullptr) : io::Json(risk[i]->p_fits);
        row["p_within_5pct_of_best"] = risk[i]->p_within_5pct;
        row["iteration_time_s_p90"] = risk[i]->time_p90_s;
        if (o.max_run_days > 0) row["p_in_time"] = risk[i]->p_in_time;
      }
      rk.push_back(row);
    }
    j["ranking"] = rk;
    if (!sc.emit.empty() && !r.ranking.empty()) {
      const auto c = space.at(r.ranking[0].index);
      j["emit"] = emit_json(sc.emit, emit_flags(sc.emit, model, space.scenarios()[c.scenario].system, c.strategy,
                                                space.scenarios()[c.scenario].settings, sc.uneven));
    }
    j["pareto_size"] = r.pareto.size();
    io::Json best = io::Json::array();
    for (std::size_t si = 0; si < r.best_per_scenario.size(); ++si) {
      const auto& b = r.best_per_scenario[si];
      io::Json row{{"scenario", scen[si].label}};
      if (b) {
        const Throughput tp = throughput_of(model, space, *b, o);
        row.update({{"config_name", config_name(space.at(b->index).strategy)},
                    {"iteration_time_s", b->time_s},
                    {"max_peak_memory_bytes", b->peak_bytes},
                    {"objective", objective_shown(o.objective, b->objective)},
                    {"mfu", tp.mfu}});
        add_run_json(row, space, *b, sc.train_tokens);
      } else {
        row["config_name"] = nullptr;
      }
      best.push_back(row);
    }
    j["best_per_scenario"] = best;
    if (why) j["nothing_fits"] = nothing_fits_json(*why, scen);
    if (shortest) {
      const auto c = space.at(shortest->index);
      j["nothing_within_deadline"] = {{"fit_in_memory", r.rejections[search::kExceedsDeadline]},
                                      {"max_days", sc.max_days},
                                      {"shortest_run_config_name", config_name(c.strategy)},
                                      {"shortest_run_scenario", scen[c.scenario].label},
                                      {"shortest_run_days", shortest->objective},
                                      {"shortest_run_iteration_time_s", shortest->time_s}};
    }
    j["output"] = sc.out;
    out << j.dump(1) << "\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  bool fits_unknown = false;
  std::set<std::string> uncalibrated, fits_from_priors;  // systems whose θ needs each note
  // The objective's own column only when it is not the iteration time (p90_s: the 80 % interval's upper end).
  const bool show_objective = o.objective != search::Objective::time;
  for (std::size_t i = 0; i < r.ranking.size(); ++i) {
    const auto& e = r.ranking[i];
    fits_unknown = fits_unknown || !risk[i] || std::isnan(risk[i]->p_fits);
    const auto c = space.at(e.index);
    // Which notes the table needs: a θ no run calibrated (every column from priors), and one fitted on times only
    // (P(fits) from priors); a search over several systems may need both.
    const std::string& system = space.scenarios()[c.scenario].system.name;
    if (unc[c.scenario] && calib::time_from_priors(*unc[c.scenario]))
      uncalibrated.insert(system);
    else if (unc[c.scenario] && calib::memory_from_priors(*unc[c.scenario]))
      fits_from_priors.insert(system);
    const Throughput tp = throughput_of(model, space, e, o);
    std::vector<std::string> row{std::to_string(i + 1),
                                 config_name(c.strategy),
                                 space.scenarios()[c.scenario].label,
                                 fmt(e.time_s, 3),
                                 risk[i] ? fmt(risk[i]->time_p90_s, 3) : "-",
                                 gib(e.peak_bytes)};
    if (show_objective) row.push_back(objective_cell(o.objective, e.objective));
    add_run_cells(row, space, e, sc.train_tokens, o.objective);
    for (auto&& x : {fmt(100 * tp.mfu, 1), risk[i] && !std::isnan(risk[i]->p_fits) ? fmt(risk[i]->p_fits, 2) : "n/a",
                     risk[i] ? fmt(risk[i]->p_within_5pct, 2) : "-"})
      row.push_back(x);
    if (o.max_run_days > 0) row.push_back(risk[i] ? fmt(risk[i]->p_in_time, 2) : "-");
    rows.push_back(row);
  }
  std::vector<std::string> header{"#", "configuration", "scenario", "time_s", "p90_s", "peak_GiB"};
  if (show_objective) header.push_back(search::to_string(o.objective));
  add_run_head(header, sc.train_tokens, o.objective);
  for (const char* h : {"MFU %", "P(fits)", "P(<=5% of #1)"}) header.push_back(h);
  if (o.max_run_days > 0) header.push_back("P(in time)");
  out << model.name << ": " << r.evaluated << " candidates evaluated in " << fmt(r.wall_s, 2) << " s ("
      << fmt(rate / 1e6, 2) << " M/s, " << r.ranks << " rank(s) x " << r.threads << " thread(s)); " << r.feasible
      << (sc.max_days > 0 ? " fit in memory and in time" : " fit in memory") << ", Pareto front " << r.pareto.size()
      << "\n"
      << table(header, rows);
  if (fits_unknown)
    out << "P(fits) n/a: the θ in use carries no memory error scale, so its memory prediction has no interval; "
           "candidates are kept by the point prediction and --memory-margin\n";
  if (!uncalibrated.empty())
    out << "p90_s, P(fits) and P(<=5% of #1) from priors on " << join(uncalibrated)
        << ": the θ in use is uncalibrated (preset defaults); its intervals are what the calibration priors state and "
           "a ~3 % per-run error, not measured errors\n";
  if (!fits_from_priors.empty())
    out << "P(fits) from priors on " << join(fits_from_priors)
        << ": the θ in use was fitted without memory measurements; its memory interval is what the priors state "
           "(runtime memory, allocator share) and a ~3 % per-run error, not a measured one\n";
  std::vector<std::vector<std::string>> rej;
  for (std::size_t i = 1; i < search::kReasons; ++i)
    if (r.rejections[i]) rej.push_back({search::reason_name(i), std::to_string(r.rejections[i])});
  if (!rej.empty()) out << "\nrejected:\n" << table({"reason", "count"}, rej);
  if (scen.size() > 1) {
    // As in the ranking: the objective's own column only when it is not the iteration time.
    std::vector<std::string> head = {"scenario", "configuration", "time_s", "peak_GiB"};
    if (show_objective) head.push_back(search::to_string(o.objective));
    head.push_back("vs best");
    add_run_head(head, sc.train_tokens, o.objective);
    head.push_back("MFU %");
    // Each scenario's best against the best of all, in the objective's shown figure (time, tokens/s per device,
    // device-hours): what a swept setting, size or system is worth.
    double best = std::numeric_limits<double>::infinity();
    for (const auto& b : r.best_per_scenario)
      if (b) best = std::min(best, b->objective);
    std::vector<std::vector<std::string>> rows;
    for (std::size_t si = 0; si < r.best_per_scenario.size(); ++si) {
      const auto& b = r.best_per_scenario[si];
      std::vector<std::string> row{scen[si].label};
      if (!b) {
        row.push_back(sc.max_days > 0 ? "(nothing fits in time)" : "(nothing fits)");
        row.resize(head.size(), "-");
      } else {
        row.insert(row.end(), {config_name(space.at(b->index).strategy), fmt(b->time_s, 3), gib(b->peak_bytes)});
        if (show_objective) row.push_back(objective_cell(o.objective, b->objective));
        const double change =
            100 * (objective_shown(o.objective, b->objective) / objective_shown(o.objective, best) - 1);
        row.push_back(b->objective == best ? "-" : (change >= 0 ? "+" : "") + fmt(change, 1) + " %");
        add_run_cells(row, space, *b, sc.train_tokens, o.objective);
        row.push_back(fmt(100 * throughput_of(model, space, *b, o).mfu, 1));
      }
      rows.push_back(std::move(row));
    }
    std::vector<Precision> precisions;
    for (const auto& s : scen) precisions.push_back(s.settings.precision);
    out << "\nbest per scenario:\n" << table(head, rows) << mfu_precision_note(precisions);
  }
  if (why) out << "\n" << nothing_fits_text(*why, space, scen, o);
  if (shortest) {
    const auto c = space.at(shortest->index);
    out << "\nnothing finishes in time: " << r.rejections[search::kExceedsDeadline]
        << " candidates fit in memory, none runs " << fmt::format("{:.4g}", sc.train_tokens) << " tokens within "
        << fmt::format("{:g}", sc.max_days) << " days; the shortest run, " << config_name(c.strategy) << " on "
        << scen[c.scenario].label << ", takes " << fmt(shortest->objective, 1) << " days (" << fmt(shortest->time_s, 3)
        << " s an iteration)\n";
  }
  if (!sc.emit.empty() && !r.ranking.empty()) {
    const auto c = space.at(r.ranking[0].index);
    const search::Scenario& won = space.scenarios()[c.scenario];
    const EmittedFlags e = emit_flags(sc.emit, model, won.system, c.strategy, won.settings, sc.uneven);
    warn_unsaid(sc.emit, e);
    out << "\n#1 as " << sc.emit << " flags:\n" << e.flags << "\n";
  }
  if (!sc.out.empty()) out << "wrote " << sc.out << "\n";
}
}  // namespace

void register_search(CLI::App& app) {
  auto* cmd = app.add_subcommand("search", "sweep a strategy space with MPI ranks and OpenMP threads");
  auto opts = std::make_shared<SearchCli>();  // owned by the command: no file-scope state
  SearchCli& sc = *opts;
  cmd->add_option("--model", sc.model, "model preset or JSON")->required();
  cmd->add_option("--system", sc.systems, "system preset(s) or JSON(s)")->required()->delimiter(',');
  cmd->add_option("--devices", sc.devices, "device count(s)")->required()->delimiter(',');
  cmd->add_option("--seq", sc.seq, "sequence length(s)")->delimiter(',');
  cmd->add_option("--global-batch", sc.gbs, "global batch size(s)")->delimiter(',');
  cmd->add_option("--params", sc.params, "θ file per system (from lmsim calibrate)")->delimiter(',');
  cmd->add_option("--settings", sc.settings_file, "training settings JSON");
  add_set_option(*cmd, sc.set_settings);
  add_stack_option(*cmd, sc.stack);
  cmd->add_option("--top", sc.top, "ranking size")->check(CLI::Range(1, 100000));
  cmd->add_option("--out", sc.out, "HDF5 output file (written atomically)");
  cmd->add_option("--objective", sc.objective, "time, tokens (per device) or device-hours")
      ->check(CLI::IsMember({"time", "tokens", "device-hours"}));
  cmd->add_option("--token-budget", sc.token_budget,
                  "tokens for the device-hours objective (default: --train-tokens, else 1e12)")
      ->check(finite_number())
      ->check(CLI::PositiveNumber);
  cmd->add_option("--train-tokens", sc.train_tokens,
                  "also each ranked candidate's training run of this many tokens (e.g. 15e12): days and "
                  "device-hours, in whole iterations (text, --json, HDF5)")
      ->check(finite_number())
      ->check(CLI::Range(1.0, kMaxTrainTokens));
  cmd->add_option("--max-days", sc.max_days,
                  "with --train-tokens: only candidates whose training run takes at most this many days (rejected "
                  "as exceeds_deadline); with --objective device-hours, the cheapest run that finishes in time")
      ->check(finite_number())
      ->check(CLI::Range(1e-6, 1e6));
  cmd->add_option("--rank-by", sc.rank_by,
                  "objective (point predictions) or risk (P(fits) >= 0.9 first, then the objective's 90th percentile; "
                  "P(fits) comes from the priors when the θ was fitted without memory measurements)")
      ->check(CLI::IsMember({"objective", "risk"}));
  cmd->add_option("--emit", sc.emit,
                  "print the best candidate as megatron or mindspeed flags, or nemo (NeMo 2) or megatron-bridge "
                  "recipe overrides; settings they cannot set are warned of")
      ->check(CLI::IsMember(emit_frameworks()));
  cmd->add_option("--memory-margin", sc.memory_margin_gib,
                  "GiB kept free on every device: headroom for what the memory model does not see (allocator "
                  "fragmentation peaks, NCCL and framework buffers); 0 to rank up to the capacity")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--tp", sc.tp, "restrict tensor parallel")->delimiter(',');
  cmd->add_option("--pp", sc.pp, "restrict pipeline parallel")->delimiter(',');
  cmd->add_option("--cp", sc.cp, "restrict context parallel")->delimiter(',');
  cmd->add_option("--dp", sc.dp, "restrict data parallel")->delimiter(',');
  cmd->add_option("--ep", sc.ep, "restrict expert parallel")->delimiter(',');
  cmd->add_option("--etp", sc.etp,
                  "expert tensor parallel degrees of an MoE model, `tp` for the attention's (default: tp,1, as "
                  "Megatron-Bridge's MoE recipes run); others fold the experts over the tp·cp·dp ranks (MoE parallel "
                  "folding)")
      ->delimiter(',');
  cmd->add_option("--vpp", sc.vpp, "restrict virtual pipeline")->delimiter(',');
  cmd->add_option("--micro-batch", sc.mbs, "restrict micro-batch sizes")->delimiter(',');
  cmd->add_option("--recompute", sc.recompute, "none|noRC, selective|selRC, full|RC")->delimiter(',');
  cmd->add_option(
         "--recompute-layers", sc.recompute_layers,
         "also sweep partial full recompute: Megatron's --recompute-method block with these "
         "--recompute-num-layers (the first N layers of every pipeline chunk replayed, the rest kept), where N "
         "leaves a layer of the widest chunk unreplayed (named -RC-block<N>); `all`: every such N, which "
         "multiplies the full-recompute candidates by up to the layers per chunk")
      ->delimiter(',');
  cmd->add_option("--sp", sc.sp, "sequence parallel on/off")->delimiter(',');
  cmd->add_option("--flash-attention", sc.flash_attention,
                  "on/off: flash attention (--use-flash-attn) as a scenario dimension, labelled /flash or /noflash "
                  "(default: as the settings say)")
      ->delimiter(',');
  cmd->add_option("--moe-dispatcher", sc.moe_dispatcher,
                  "alltoall,allgather,flex: an MoE model's token dispatcher (--moe-token-dispatcher-type; flex: "
                  "DeepEP / HybridEP) as a scenario dimension, labelled /alltoall, /allgather or /flex (default: as "
                  "the settings say)")
      ->delimiter(',');
  cmd->add_option("--vary", sc.vary,
                  "KEY=V1,V2,... (repeatable): a training setting as --set spells it, swept as a scenario dimension "
                  "labelled /KEY=VALUE (precision=bf16,fp8; tp_comm_overlap=true,false; recompute_modules=[\"mlp\"],"
                  "[\"core_attn\",\"mlp\"]); several keys sweep every combination");
  cmd->add_option("--distributed-optimizer", sc.distopt, "on/off")->delimiter(',');
  cmd->add_option("--fsdp", sc.fsdp, "on/off: fully sharded data parallelism (default: as the settings say)")
      ->delimiter(',');
  cmd->add_option("--cp-comm-type", sc.cp_comm_type,
                  "context-parallel algorithms to sweep where cp > 1: p2p (ring), a2a (Ulysses), allgather, a2a+p2p "
                  "(at every Ulysses degree that splits cp below it); default: the settings' cp_comm_type")
      ->delimiter(',');
  cmd->add_flag("--allow-cross-node-tp", sc.cross_node_tp, "allow TP groups across nodes");
  cmd->add_flag("--allow-uneven-layers", sc.uneven, "let pipeline stages differ by one layer");
  cmd->add_option("--chunk", sc.chunk, "candidates per work chunk (default: automatic)")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 40));
  cmd->add_flag("--write-all", sc.write_all, "also write every evaluated configuration");
  cmd->add_option("--checkpoint-dir", sc.checkpoint_dir, "checkpoint folder (default: <out>.ckpt)");
  cmd->add_option("--checkpoint-every", sc.checkpoint_every, "seconds between checkpoints")
      ->check(finite_number())
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_flag("--resume", sc.resume, "continue from the checkpoints of an interrupted run");
  cmd->add_flag("--quiet", sc.quiet, "no progress output");
  cmd->add_flag("--json", sc.json, "machine-readable summary on stdout");
  cmd->callback([opts] { run(*opts, std::cout); });
}

}  // namespace lmsim::app
