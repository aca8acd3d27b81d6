// `lmsim predict`: one simulation with its breakdown, per-rank memory and (on request) diagnostics.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <vector>

#include "apps/common.hpp"
#include "apps/emit.hpp"
#include "apps/predict_report.hpp"

namespace lmsim::app {

namespace {
struct PredictCli {
  RunOptions opt;
  std::vector<std::string> strategy_names;
  bool diagnostics = false, allow_uneven = false, allow_cross_node = false;
  std::string gemm_csv, emit;
  double train_tokens = 0;        // --train-tokens
  std::vector<std::string> vary;  // --vary KEY=V1,V2,...: each strategy under each combination of settings
};

// The settings keys predict's --vary leaves to options of their own.
const std::vector<std::pair<std::string, std::string>> kPredictVaryElsewhere = {
    {"seq_length", "--seq"}, {"global_batch_size", "--global-batch"}, {"micro_batch_size", "--micro-batch"}};

// "41.3 days (80 %: 39.0 - 43.9), 3,968 device-hours": a training run's time, with the iteration's 80 % interval
// (every iteration errs alike), and its device-hours.
std::string training_run_phrase(const PredictResult& x) {
  const TrainingRun run = x.run();
  const int prec = run.days() < 10 ? 2 : 1;
  std::string out = fmt(run.days(), prec) + " days";
  if (x.has_iv)
    out += " (80 %: " + fmt(run.days_at(x.iv.time_s_80.lower), prec) + " - " +
           fmt(run.days_at(x.iv.time_s_80.upper), prec) + ")";
  return out + ", " + grouped(run.device_hours) + " device-hours";
}

// Diagnostics rows of consecutive stages that are the same (the middle stages of a uniform pipeline) printed once,
// their stages as a range ("1-62"): `row` gives a record's columns without its stage, which goes in column `at`.
template <class Record, class Row>
std::vector<std::vector<std::string>> merged_stage_rows(const std::vector<Record>& records, std::size_t at, Row row) {
  std::vector<std::pair<int, std::vector<std::vector<std::string>>>> stages;  // stage, its rows in order
  for (const auto& x : records) {
    if (stages.empty() || stages.back().first != x.stage) stages.push_back({x.stage, {}});
    stages.back().second.push_back(row(x));
  }
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t j = i;
    while (j + 1 < stages.size() && stages[j + 1].second == stages[i].second &&
           stages[j + 1].first == stages[j].first + 1)
      ++j;
    const std::string range = i == j ? std::to_string(stages[i].first)
                                     : std::to_string(stages[i].first) + "-" + std::to_string(stages[j].first);
    for (auto r : stages[i].second) {
      r.insert(r.begin() + static_cast<std::ptrdiff_t>(at), range);
      out.push_back(std::move(r));
    }
    i = j + 1;
  }
  return out;
}

// The settings a prediction ran under, in a line: what changes memory and time most.
std::string settings_summary(const Strategy& s, const TrainingSettings& t, const System& sys) {
  const ResolvedStrategy r = resolve(s, t);
  std::string out = to_string(t.precision);
  if (t.precision == Precision::fp8) out += std::string(" (") + to_string(t.fp8_recipe) + " scaling)";
  if (t.precision == Precision::fp4) out += " (NVFP4)";
  if (t.reduces_amax_over_tp_only()) out += ", amax reduced over TP only";
  if (t.runs_bf16_ends())
    out += ", the first " + std::to_string(t.bf16_layers_at_start()) + " and last " +
           std::to_string(t.bf16_layers_at_end()) + " layers in BF16";
  if (!t.flash_in(s.context_parallel))
    out += ", attention scores stored";
  else if (t.flash_only_through_cp(s.context_parallel))
    out += ", flash attention (turned on by context parallelism: flash_attention_with_cp)";
  else
    out += ", flash attention";
  if (t.flash_in(s.context_parallel) && t.attention_backend == AttentionBackend::flash)
    out += " (FlashAttention-2" + (sys.flash_attention_2_throughput != 1
                                       ? ", " + fmt(sys.flash_attention_2_throughput, 2) + " of cuDNN's)"
                                       : std::string(")"));
  if (t.document_tokens > 0 && t.document_tokens < t.seq_length)
    out += ", packed documents of " + std::to_string(t.document_tokens) + " tokens (attention within each)";
  if (t.lora()) {
    std::string targets;
    for (const std::string& name : io::lora_target_names(t)) targets += (targets.empty() ? "" : " ") + name;
    out += ", LoRA rank " + std::to_string(t.lora_rank) + " on " + targets + " (base frozen)";
  }
  if (r.sequence_parallel) out += ", SP";
  if (r.tp_comm_overlap)
    out += ", TP communication overlap";
  else if (t.tp_comm_overlap && s.tensor_parallel > 1)
    out += ", TP communication overlap not in effect (needs SP)";
  if (r.synchronous_tp_allreduce) out += ", synchronous backward TP all-reduce";
  if (s.context_parallel > 1) {
    static const char* const kCp[kNumCpCommTypes] = {"ring (p2p)", "Ulysses (a2a)", "K/V all-gather",
                                                     "Ulysses inside a ring (a2a+p2p)"};
    out += std::string(", context parallel by ") + kCp[static_cast<int>(r.cp_comm_type)];
    if (r.cp_comm_type == CpCommType::a2a_p2p) out += " of degree " + std::to_string(r.ulysses_degree_in_cp);
  }
  out += r.fsdp ? ", FSDP" : r.distributed_optimizer ? ", distributed optimizer" : ", replicated optimizer";
  // The data-parallel overlaps (Megatron's --overlap-grad-reduce, --overlap-param-gather), where there is a
  // data-parallel group to overlap.
  if (r.data_parallel_group) {
    if (t.overlap_grad_reduce) out += ", overlapped gradient reduction";
    if (t.overlap_param_gather && r.distributed_optimizer) out += ", overlapped parameter gather";
  }
  if (t.overlap_p2p_comm && s.pipeline_parallel > 1 && s.virtual_pipeline > 1) out += ", overlapped pipeline sends";
  if (s.recompute == Recompute::full && s.recompute_num_layers > 0)
    out += s.recompute_method == RecomputeMethod::block
               ? ", full recompute of " + search::first_layers(s.recompute_num_layers) + " of every chunk"
               : ", full recompute in groups of " + std::to_string(s.recompute_num_layers) + " layers";
  if (r.distribute_saved_activations)
    out += ", checkpoints distributed over TP";
  else if (t.distribute_saved_activations)
    out += ", checkpoints not distributed (needs full recompute, TP > 1 and no SP)";
  if (r.moe_a2a_overlap)
    out += ", batch-level EP overlap";
  else if (t.overlap_moe_expert_parallel_comm)
    out +=
        ", batch-level EP overlap not in effect (needs EP > 1, all-to-all or flex dispatch, no full recompute or "
        "MoE replay, interleaving when pipelined)";
  if (t.moe_expert_capacity_factor > 0)
    out += fmt::format(", token dropping at capacity factor {:g}{}", t.moe_expert_capacity_factor,
                       t.moe_pad_expert_input_to_capacity ? ", padded to capacity" : "");
  if (s.recompute == Recompute::selective) {
    std::string mods;
    for (const std::string& m : io::recompute_module_names(t)) mods += (mods.empty() ? "" : "+") + m;
    out += ", recompute modules " + (mods.empty() ? std::string("none") : mods);
  }
  if (!t.fused_kernels) out += ", unfused kernels";
  if (!t.fused_norm) out += ", unfused norm";
  if (t.te_cross_entropy) out += ", TE cross entropy";
  const std::string low = t.precision == Precision::fp4 ? "FP4" : "FP8";
  if (r.fp8_param_gather)
    out += ", " + low + " parameters";
  else if (t.fp8_param_gather)  // valid settings have it only under FP8 or FP4
    out += ", " + low + " parameters not in effect (need the distributed optimizer or FSDP)";
  if (t.nccl_ub) out += ", NCCL user buffers";
  // NVLS changes the all-reduces of a system that has it: said there, either way.
  if (sys.nvlink_sharp) out += t.nccl_nvls_enable ? ", NCCL NVLS all-reduce" : ", NCCL NVLS off (ring all-reduce)";
  return out;
}

// Several strategies side by side under one model, system, settings and θ: a row each (time with its 80 %
// interval and its change from the first, peak memory, P(fits), MFU), then every result term per strategy. With
// --json, {"predictions": [the one-strategy document of each]}. Every strategy is predicted before anything is
// written, so a bad one leaves no partial output.
// With several --devices, every strategy at each count, by count (a layout's scaling: dp follows the count).
// With --vary, every strategy under each combination of the varied settings (a `settings` column; `varied` in JSON).
void compare(const PredictCli& o, const std::vector<std::vector<std::string>>& combos, std::ostream& os) {
  auto count = [](std::size_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  if (o.diagnostics || !o.gemm_csv.empty() || !o.emit.empty())
    throw io::InputError(
        "--strategy", 0, "",
        "--diagnostics, --gemms-csv and --emit take one --strategy and one --devices" +
            std::string(combos.size() > 1 ? " and one value per --vary" : "") + "; " +
            count(o.strategy_names.size(), "strategy", "strategies") + " at " +
            count(std::max<std::size_t>(1, o.opt.device_counts.size()), "device count", "device counts") +
            (combos.size() > 1 ? " under " + std::to_string(combos.size()) + " combinations of settings" : "") +
            " were given");
  const Resolved r = resolve(o.opt);
  std::vector<Resolved> variants;  // r under each combination of the varied settings
  for (const std::vector<std::string>& combo : combos) {
    variants.push_back(r);
    if (!combo.empty()) variants.back().settings = resolve_varied_settings(o.opt, combo, r.system);
  }
  std::vector<PredictResult> res;
  std::vector<std::size_t> combo_of;  // res[i]'s combination
  const std::vector<int> counts = o.opt.device_counts.empty() ? std::vector<int>{0} : o.opt.device_counts;
  for (const int devices : counts) {
    RunOptions at = o.opt;
    at.devices = devices;
    for (std::size_t v = 0; v < variants.size(); ++v)
      for (const std::string& name : o.strategy_names) {
        res.push_back(predict({at, name, o.allow_uneven, o.allow_cross_node, "", o.train_tokens}, variants[v], true));
        combo_of.push_back(v);
      }
  }
  const bool varied = combos.size() > 1;
  // Several device counts: each row's scaling efficiency, the device-seconds an iteration takes at the first count
  // over those it takes here, for the same strategy and settings (res holds them count by count).
  const bool scaling = counts.size() > 1;
  const std::size_t per_count = o.strategy_names.size() * variants.size();
  auto efficiency = [&](std::size_t i) {
    const PredictResult &base = res[i % per_count], &x = res[i];
    return base.p.iteration_time_s * static_cast<double>(base.s.devices()) /
           (x.p.iteration_time_s * static_cast<double>(x.s.devices()));
  };
  if (o.opt.json) {
    io::Json all = io::Json::array();
    for (std::size_t i = 0; i < res.size(); ++i) {
      io::Json j = res[i].json();
      if (scaling) j["scaling_efficiency"] = efficiency(i);
      if (varied) j["varied"] = settings_of_set(combos[combo_of[i]], "--vary");
      all.push_back(j);
    }
    os << io::Json{{"predictions", all}}.dump(1) << "\n";
    return;
  }
  const double first_s = res.front().p.iteration_time_s;
  os << r.model.name << " on " << r.system.name << " (seq " << r.settings.seq_length << ", global batch "
     << r.settings.global_batch_size << ")\n\n";
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < res.size(); ++i) {
    const PredictResult& x = res[i];
    const Throughput tp = throughput(x.p, x.s, r.system, x.r.settings);
    const double change = 100 * (x.p.iteration_time_s / first_s - 1);
    std::vector<std::string> row{std::to_string(i + 1), config_name(x.s)};
    if (varied) row.push_back(join(combos[combo_of[i]]));
    row.insert(row.end(),
               {std::to_string(x.s.devices()), fmt(x.p.iteration_time_s, 3),
                x.has_iv ? fmt(x.iv.time_s_80.lower, 3) + " - " + fmt(x.iv.time_s_80.upper, 3) : "-",
                i == 0 ? "-" : (change >= 0 ? "+" : "") + fmt(change, 1) + " %", gib(x.p.max_peak_memory_bytes),
                x.p.feasible ? "yes" : "NO", std::isfinite(x.p_fits) ? fmt(x.p_fits, 2) : "-", fmt(100 * tp.mfu, 1)});
    if (scaling) row.push_back(fmt(100 * efficiency(i), 1));
    if (o.train_tokens > 0) {
      const TrainingRun run = x.run();
      row.push_back(fmt(run.days(), 2));
      row.push_back(grouped(run.device_hours));
    }
    rows.push_back(row);
  }
  std::vector<std::string> head{"#", "configuration"};
  if (varied) head.push_back("settings");
  head.insert(head.end(), {"devices", "time_s", "80 % interval", "vs #1", "peak_GiB", "fits", "P(fits)", "MFU %"});
  if (scaling) head.push_back("scaling %");
  if (o.train_tokens > 0) {
    head.push_back("days");
    head.push_back("device-hours");
  }
  os << table(head, rows);
  std::vector<Precision> precisions;
  for (const PredictResult& x : res) precisions.push_back(x.r.settings.precision);
  os << mfu_precision_note(precisions) << "\n";
  if (scaling)
    os << "scaling %: device-seconds per iteration at " << counts.front()
       << " devices over those here, for the same strategy (100: linear)\n\n";
  if (o.train_tokens > 0)
    os << "days, device-hours: a training run of " << fmt::format("{:.4g}", o.train_tokens)
       << " tokens at each row's pace\n\n";
  std::vector<std::string> term_head{"term", "kind"};
  for (std::size_t i = 0; i < res.size(); ++i) term_head.push_back("#" + std::to_string(i + 1) + " s");
  std::vector<std::vector<std::string>> terms;
  for (const auto& t : breakdown_terms()) {
    std::vector<std::string> row{t.name, to_string(t.kind)};
    for (const PredictResult& x : res) row.push_back(fmt(x.p.breakdown.*(t.field)));
    terms.push_back(row);
  }
  os << table(term_head, terms) << "\n";
  for (std::size_t i = 0; i < res.size(); ++i)
    os << "#" << i + 1 << " settings: " << settings_summary(res[i].s, res[i].r.settings, res[i].r.system) << "\n";
}

// One prediction: options in, the report on `os` (the GEMMs to --gemms-csv).
void run(PredictCli o, std::ostream& os) {
  o.opt.devices = o.opt.device_counts.empty() ? 0 : o.opt.device_counts.front();
  const auto combos = combinations(varied_settings(o.vary, o.opt.set_settings, kPredictVaryElsewhere));
  if (o.strategy_names.size() > 1 || o.opt.device_counts.size() > 1 || combos.size() > 1) return compare(o, combos, os);
  // One value for each varied key: a --set of each (checked as --vary's first).
  if (!combos.front().empty()) {
    (void)resolve_varied_settings(o.opt, combos.front(), io::resolve_system(o.opt.system, nullptr, nullptr));
    o.opt.set_settings.insert(o.opt.set_settings.end(), combos.front().begin(), combos.front().end());
  }
  const RunOptions& opt = o.opt;
  const std::string &strategy_name = o.strategy_names.front(), &gemm_csv = o.gemm_csv, &emit = o.emit;
  const bool diagnostics = o.diagnostics, allow_uneven = o.allow_uneven, allow_cross_node = o.allow_cross_node;
  const PredictResult res = predict({opt, strategy_name, allow_uneven, allow_cross_node, emit, o.train_tokens});
  const Resolved& r = res.r;
  const Strategy& s = res.s;
  const Prediction& p = res.p;
  const std::vector<double>& mem = res.mem;
  const bool has_iv = res.has_iv;
  const calib::PredictionIntervals& iv = res.iv;
  if (!gemm_csv.empty()) {  // the predicted GEMMs in the shape of a profiler's matrix_operator_latency.csv
    std::string csv = "type,duration_us,batch,m,n,k,count,dtype,stage\n";
    for (const auto& g : gemm_diagnostics(r.model, s, r.system, r.settings, r.params))
      csv += g.name + "," + fmt(g.predicted_us, 3) + "," + std::to_string(g.batch) + "," + std::to_string(g.m) + "," +
             std::to_string(g.n) + "," + std::to_string(g.k) + "," + fmt(g.count, 0) + "," + to_string(g.dtype) + "," +
             std::to_string(g.stage) + "\n";
    io::write_file_atomic(gemm_csv, csv);
  }
  if (opt.json) {
    os << res.json().dump(1) << "\n";
    return;
  }
  if (!emit.empty()) {  // the flags alone, so they can be pasted or piped
    const EmittedFlags e = emit_flags(emit, r.model, r.system, s, r.settings, allow_uneven);
    warn_unsaid(emit, e);
    os << e.flags << "\n";
    return;
  }
  os << r.model.name << " on " << s.devices() << " x " << r.system.name << ", " << config_name(s) << " (seq "
     << r.settings.seq_length << ", global batch " << r.settings.global_batch_size << ", " << p.num_micro_batches
     << " micro-batches of " << resolve(s, r.settings).micro_batch_size << ")\n"
     << "settings        " << settings_summary(s, r.settings, r.system) << "\n"
     << "iteration time  " << fmt(p.iteration_time_s, 3) << " s"
     << (has_iv ? "  (80 %: " + fmt(iv.time_s_80.lower, 3) + " - " + fmt(iv.time_s_80.upper, 3) +
                      ", 90 %: " + fmt(iv.time_s_90.lower, 3) + " - " + fmt(iv.time_s_90.upper, 3) + " s)" +
                      (calib::time_from_priors(*r.uncertainty) ? " (from priors: uncalibrated θ)" : "")
                : std::string())
     << "\n"
     << (has_iv ? "                log sd " + fmt(100 * iv.time_log_sd, 1) + " %: residual " +
                      fmt(100 * res.time_sd_parts.residual, 1) + ", beyond the fitted range " +
                      fmt(100 * res.time_sd_parts.beyond_range, 1) + ", fitted θ " +
                      fmt(100 * res.time_sd_parts.fitted_parameters, 1) + ", priors of unmeasured parameters " +
                      fmt(100 * res.time_sd_parts.unfitted_priors, 1) + "\n"
                : std::string())
     << "throughput      " << fmt(throughput(p, s, r.system, r.settings).tokens_per_s_per_device, 0)
     << " tokens/s per device, " << fmt(throughput(p, s, r.system, r.settings).model_tflops_per_device, 0)
     << " model TFLOP/s per device, MFU " << fmt(100 * throughput(p, s, r.system, r.settings).mfu, 1) << " %\n"
     << (o.train_tokens > 0 ? "training run    " + fmt::format("{:.4g}", o.train_tokens) + " tokens, " +
                                  grouped(res.run().iterations) + " iterations: " + training_run_phrase(res) + "\n"
                            : std::string())
     << "peak memory     " << gib(p.max_peak_memory_bytes) << " GiB (stage " << p.peak_stage << ") of "
     << gib(p.capacity_bytes) << " GiB: " << (p.feasible ? "fits" : "DOES NOT FIT")
     << (std::isfinite(res.p_fits) ? " (P(fits) " + fmt(res.p_fits, 2) + ")" : "") << "\n";
  if (has_iv && iv.memory_log_sd > 0)
    os << "                80 %: " << gib(iv.memory_bytes_80.lower) << " - " << gib(iv.memory_bytes_80.upper)
       << ", 90 %: " << gib(iv.memory_bytes_90.lower) << " - " << gib(iv.memory_bytes_90.upper) << " GiB"
       << (calib::time_from_priors(*r.uncertainty)     ? " (from priors: uncalibrated θ)"
           : calib::memory_from_priors(*r.uncertainty) ? " (from priors: θ was fitted without memory measurements)"
                                                       : "")
       << "\n";
  if (res.partial)
    os << "partial RC      " << config_name(res.partial->strategy) << " ("
       << search::partial_recompute_phrase(res.partial->strategy)
       << ") also fits: " << fmt(res.partial->prediction.iteration_time_s, 3) << " s, "
       << gib(res.partial->prediction.max_peak_memory_bytes) << " GiB"
       << (std::isfinite(res.partial_p_fits) ? " (P(fits) " + fmt(res.partial_p_fits, 2) + ")" : "") << "\n";
  os << "\n";
  std::vector<std::vector<std::string>> terms;
  for (const auto& t : breakdown_terms())
    terms.push_back({t.name, to_string(t.kind), fmt(p.breakdown.*(t.field)), t.doc});
  os << table({"term", "kind", "seconds", "what"}, terms) << "pipeline split: " << to_string(p.pipeline_split)
     << "; one " << (p.layer.moe ? "MoE" : "dense") << " layer, one micro-batch: forward "
     << fmt(p.layer.forward_s * 1e3, 2) << " ms, backward " << fmt(p.layer.backward_s * 1e3, 2) << " ms (recompute "
     << fmt(p.layer.recompute_s * 1e3, 2) << " ms)\n\n";
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < p.num_stages; ++i) {
    const StageResult& st = p.stages[static_cast<std::size_t>(i)];
    rows.push_back({std::to_string(i), std::to_string(st.num_layers), fmt(st.per_microbatch_s * 1e3, 1),
                    gib(st.weight_bytes), gib(st.gradient_bytes), gib(st.optimizer_bytes), gib(st.activation_bytes),
                    gib(st.transient_bytes), gib(st.runtime_bytes), gib(st.peak_bytes)});
  }
  os << table({"stage", "layers", "ms/mb", "weights", "grads", "optim", "activ", "transient", "runtime", "peak_GiB"},
              rows)
     << "\nper-rank peak memory (GiB):";
  for (std::size_t i = 0; i < mem.size() && i < 64; ++i) os << (i % 8 == 0 ? "\n  " : " ") << gib(mem[i]);
  if (mem.size() > 64) os << "\n  ... (" << mem.size() << " ranks; --json lists all)";
  os << "\n";
  if (diagnostics) {
    const auto g =
        merged_stage_rows(gemm_diagnostics(r.model, s, r.system, r.settings, r.params), 1, [](const auto& x) {
          return std::vector<std::string>{
              x.name,          std::to_string(x.batch), std::to_string(x.m), std::to_string(x.n), std::to_string(x.k),
              fmt(x.count, 0), fmt(x.predicted_us, 1)};
        });
    os << "\n" << table({"gemm", "stage", "batch", "m", "n", "k", "calls", "us/call"}, g);
    const auto c =
        merged_stage_rows(collective_diagnostics(r.model, s, r.system, r.settings, r.params), 2, [](const auto& x) {
          return std::vector<std::string>{x.primitive,
                                          x.group,
                                          std::to_string(x.group_size),
                                          std::to_string(x.nodes),
                                          fmt(x.link_share, 3),
                                          fmt(x.bytes / 1048576.0, 2),
                                          fmt(x.count, 0),
                                          fmt(x.predicted_ms, 3),
                                          x.protocol};
        });
    os << "\n"
       << table({"collective", "group", "stage", "size", "nodes", "link_share", "MiB", "calls", "ms/call", "protocol"},
                c);
    if (!res.elasticities.empty()) {  // what bounds the time, parameter by parameter
      std::vector<std::vector<std::string>> el;
      for (const auto& e : res.elasticities)
        el.push_back({param_table()[e.param].name, (e.value > 0 ? "+" : "") + fmt(e.value, 2),
                      e.prior_only ? "prior (never measured)" : "fitted"});
      os << "\ntime elasticity, d log T / d log θ (10 % more of a parameter: about 10 x this % more time):\n"
         << table({"parameter", "elasticity", "θ"}, el);
    }
  }
}
}  // namespace

void register_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "predict iteration time and per-rank peak memory of one strategy");
  auto opts = std::make_shared<PredictCli>();  // owned by the command: no file-scope state
  RunOptions& opt = opts->opt;
  std::string &gemm_csv = opts->gemm_csv, &emit = opts->emit;
  bool &diagnostics = opts->diagnostics, &allow_uneven = opts->allow_uneven, &allow_cross_node = opts->allow_cross_node;
  add_run_options(*cmd, opt, false);
  cmd->add_option("--strategy", opts->strategy_names,
                  "configuration name, e.g. dp2-tp4-pp1-cp1-RC (extended: -mbs2-vpp2-sp-do); fields in any order, "
                  "tp/pp/cp 1 and recompute noRC where left out, dp from --devices (tp8-pp4-vpp5-RC); several "
                  "(comma-separated or repeated) are compared side by side")
      ->required()
      ->delimiter(',');
  cmd->add_flag("--diagnostics", diagnostics,
                "also print the GEMM problems, the collectives and the time's elasticity to each parameter of θ");
  cmd->add_option("--emit", emit,
                  "print the strategy as megatron or mindspeed flags, or nemo (NeMo 2) or megatron-bridge recipe "
                  "overrides; settings they cannot set are warned of")
      ->check(CLI::IsMember(emit_frameworks()));
  cmd->add_option("--gemms-csv", gemm_csv, "write the predicted GEMMs as a matrix_operator_latency-style CSV");
  cmd->add_option("--train-tokens", opts->train_tokens,
                  "also the training run of this many tokens (e.g. 15e12): whole iterations, days with the 80 % "
                  "interval, device-hours")
      ->check(finite_number())
      ->check(CLI::Range(1.0, kMaxTrainTokens));
  cmd->add_option("--vary", opts->vary,
                  "KEY=V1,V2,... (repeatable): a training setting as --set spells it, each value a row of the "
                  "comparison (precision=bf16,fp8; tp_comm_overlap=true,false); several keys: every combination");
  cmd->add_flag("--allow-uneven-layers", allow_uneven, "let pipeline stages differ by one layer");
  cmd->add_flag("--allow-cross-node-tp", allow_cross_node, "allow tensor-parallel groups across nodes");
  cmd->callback([opts] { run(*opts, std::cout); });
}

}  // namespace lmsim::app
