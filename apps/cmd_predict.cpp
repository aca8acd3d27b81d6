// `lmsim predict`: one simulation with its breakdown, per-rank memory and (on request) diagnostics.
#include <iostream>

#include "apps/common.hpp"
#include "apps/emit.hpp"

namespace lmsim::app {

namespace {
RunOptions opt;
std::string strategy_name;
bool diagnostics = false, allow_uneven = false, allow_cross_node = false;
std::string gemm_csv, emit;

template <class Owner, std::size_t N>
io::Json terms_json(const Owner& x, const std::array<TermInfo<Owner>, N>& terms) {
  io::Json j = io::Json::object();
  for (const auto& t : terms) j[t.name] = x.*(t.field);
  return j;
}

void run() {
  const Resolved r = resolve(opt);
  const Strategy s = io::parse_strategy(strategy_name);
  if (opt.devices && opt.devices != s.devices())
    throw io::InputError("--strategy", 0, "optimization_config",
                         "'" + strategy_name + "' uses " + std::to_string(s.devices()) + " devices, --devices is " +
                             std::to_string(opt.devices));
  SimOptions so;
  so.validity = {r.system.devices_per_node, allow_cross_node, allow_uneven};
  const Prediction p = simulate(r.model, s, r.system, r.settings, r.params, so);
  if (!p.ok())
    throw io::InputError("--strategy", 0, "optimization_config",
                         "'" + strategy_name + "' cannot run " + r.model.name + ": " + describe(p.rejection));
  const std::vector<double> mem = per_rank_peak_memory(p, s);
  calib::PredictionIntervals iv{};  // a plain value: GCC 12 misreads an optional of doubles as uninitialised
  bool has_iv = false;
  if (r.uncertainty)
    if (const auto x = calib::intervals(r.model, s, r.system, r.settings, r.params, *r.uncertainty, so)) {
      iv = *x;
      has_iv = true;
    }
  if (!gemm_csv.empty()) {  // the predicted GEMMs in the shape of a profiler's matrix_operator_latency.csv
    std::string csv = "type,duration_us,batch,m,n,k,count,dtype,stage\n";
    for (const auto& g : gemm_diagnostics(r.model, s, r.system, r.settings, r.params))
      csv += g.name + "," + fmt(g.predicted_us, 3) + "," + std::to_string(g.batch) + "," + std::to_string(g.m) + "," +
             std::to_string(g.n) + "," + std::to_string(g.k) + "," + fmt(g.count, 0) + "," + to_string(g.dtype) + "," +
             std::to_string(g.stage) + "\n";
    io::write_file_atomic(gemm_csv, csv);
  }
  if (opt.json) {
    io::Json j;
    j["model"] = r.model.name;
    j["system"] = r.system.name;
    j["strategy"] = config_name(s);
    j["devices"] = s.devices();
    j["settings"] = io::to_json(r.settings);
    j["params"] = io::to_json(r.params);
    j["params_source"] = r.params_source;
    if (!emit.empty())
      j["emit"] = {{"framework", emit}, {"flags", emit_flags(emit, r.model, s, r.settings, allow_uneven)}};
    j["iteration_time_s"] = p.iteration_time_s;
    j["peak_memory_bytes"] = mem;
    j["max_peak_memory_bytes"] = p.max_peak_memory_bytes;
    j["capacity_bytes"] = p.capacity_bytes;
    j["feasible"] = p.feasible;
    const Throughput tp = throughput(p, s, r.system, r.settings);
    j["model_tflops_per_device"] = tp.model_tflops_per_device;
    j["mfu"] = tp.mfu;
    j["tokens_per_s_per_device"] = tp.tokens_per_s_per_device;
    if (has_iv) {  // central 80 % and 90 % prediction intervals: percentiles 10/90 and 5/95
      j["iteration_time_s_p05"] = iv.time_s_90.lower;
      j["iteration_time_s_p10"] = iv.time_s_80.lower;
      j["iteration_time_s_p90"] = iv.time_s_80.upper;
      j["iteration_time_s_p95"] = iv.time_s_90.upper;
      if (iv.memory_log_sd > 0) {
        j["max_peak_memory_bytes_p05"] = iv.memory_bytes_90.lower;
        j["max_peak_memory_bytes_p10"] = iv.memory_bytes_80.lower;
        j["max_peak_memory_bytes_p90"] = iv.memory_bytes_80.upper;
        j["max_peak_memory_bytes_p95"] = iv.memory_bytes_90.upper;
      }
    }
    j["num_micro_batches"] = p.num_micro_batches;
    j["breakdown"] = terms_json(p.breakdown, breakdown_terms());
    j["pipeline_split"] = to_string(p.pipeline_split);
    j["layer"] = {{"forward_s", p.layer.forward_s},
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
                       {"bytes", c.bytes},
                       {"count", c.count},
                       {"predicted_ms", c.predicted_ms}});
    j["collectives"] = colls;
    std::cout << j.dump(1) << "\n";
    return;
  }
  if (!emit.empty()) {  // the flags alone, so they can be pasted or piped
    std::cout << emit_flags(emit, r.model, s, r.settings, allow_uneven) << "\n";
    return;
  }
  std::cout << r.model.name << " on " << s.devices() << " x " << r.system.name << ", " << config_name(s) << " (seq "
            << r.settings.seq_length << ", global batch " << r.settings.global_batch_size << ", " << p.num_micro_batches
            << " micro-batches of " << resolve(s, r.settings).micro_batch_size << ")\n"
            << "iteration time  " << fmt(p.iteration_time_s, 3) << " s"
            << (has_iv ? "  (80 %: " + fmt(iv.time_s_80.lower, 3) + " - " + fmt(iv.time_s_80.upper, 3) +
                             ", 90 %: " + fmt(iv.time_s_90.lower, 3) + " - " + fmt(iv.time_s_90.upper, 3) + " s)"
                       : std::string())
            << "\n"
            << "throughput      " << fmt(throughput(p, s, r.system, r.settings).tokens_per_s_per_device, 0)
            << " tokens/s per device, " << fmt(throughput(p, s, r.system, r.settings).model_tflops_per_device, 0)
            << " model TFLOP/s per device, MFU " << fmt(100 * throughput(p, s, r.system, r.settings).mfu, 1) << " %\n"
            << "peak memory     " << gib(p.max_peak_memory_bytes) << " GiB (stage " << p.peak_stage << ") of "
            << gib(p.capacity_bytes) << " GiB: " << (p.feasible ? "fits" : "DOES NOT FIT") << "\n\n";
  std::vector<std::vector<std::string>> terms;
  for (const auto& t : breakdown_terms())
    terms.push_back({t.name, to_string(t.kind), fmt(p.breakdown.*(t.field)), t.doc});
  std::cout << table({"term", "kind", "seconds", "what"}, terms) << "pipeline split: " << to_string(p.pipeline_split)
            << "; one dense layer, one micro-batch: forward " << fmt(p.layer.forward_s * 1e3, 2) << " ms, backward "
            << fmt(p.layer.backward_s * 1e3, 2) << " ms (recompute " << fmt(p.layer.recompute_s * 1e3, 2) << " ms)\n\n";
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < p.num_stages; ++i) {
    const StageResult& st = p.stages[static_cast<std::size_t>(i)];
    rows.push_back({std::to_string(i), std::to_string(st.num_layers), fmt(st.per_microbatch_s * 1e3, 1),
                    gib(st.weight_bytes), gib(st.gradient_bytes), gib(st.optimizer_bytes), gib(st.activation_bytes),
                    gib(st.transient_bytes), gib(st.runtime_bytes), gib(st.peak_bytes)});
  }
  std::cout << table({"stage", "layers", "ms/mb", "weights", "grads", "optim", "activ", "transient", "runtime",
                      "peak_GiB"},
                     rows)
            << "\nper-rank peak memory (GiB):";
  for (std::size_t i = 0; i < mem.size() && i < 64; ++i) std::cout << (i % 8 == 0 ? "\n  " : " ") << gib(mem[i]);
  if (mem.size() > 64) std::cout << "\n  ... (" << mem.size() << " ranks; --json lists all)";
  std::cout << "\n";
  if (diagnostics) {
    std::vector<std::vector<std::string>> g;
    for (const auto& x : gemm_diagnostics(r.model, s, r.system, r.settings, r.params))
      g.push_back({x.name, std::to_string(x.stage), std::to_string(x.batch), std::to_string(x.m), std::to_string(x.n),
                   std::to_string(x.k), fmt(x.count, 0), fmt(x.predicted_us, 1)});
    std::cout << "\n" << table({"gemm", "stage", "batch", "m", "n", "k", "calls", "us/call"}, g);
    std::vector<std::vector<std::string>> c;
    for (const auto& x : collective_diagnostics(r.model, s, r.system, r.settings, r.params))
      c.push_back({x.primitive, x.group, std::to_string(x.stage), std::to_string(x.group_size), std::to_string(x.nodes),
                   fmt(x.bytes / 1048576.0, 2), fmt(x.count, 0), fmt(x.predicted_ms, 3)});
    std::cout << "\n" << table({"collective", "group", "stage", "size", "nodes", "MiB", "calls", "ms/call"}, c);
  }
}
}  // namespace

void register_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "predict iteration time and per-rank peak memory of one strategy");
  add_run_options(*cmd, opt, false);
  cmd->add_option("--strategy", strategy_name,
                  "configuration name, e.g. dp2-tp4-pp1-cp1-RC (extended: -mbs2-vpp2-sp-do)")
      ->required();
  cmd->add_flag("--diagnostics", diagnostics, "also print the GEMM problems and collectives");
  cmd->add_option("--emit", emit, "print the strategy as megatron, nemo or mindspeed flags")
      ->check(CLI::IsMember({"megatron", "nemo", "mindspeed"}));
  cmd->add_option("--gemms-csv", gemm_csv, "write the predicted GEMMs as a matrix_operator_latency-style CSV");
  cmd->add_flag("--allow-uneven-layers", allow_uneven, "let pipeline stages differ by one layer");
  cmd->add_flag("--allow-cross-node-tp", allow_cross_node, "allow tensor-parallel groups across nodes");
  cmd->callback(run);
}

}  // namespace lmsim::app
