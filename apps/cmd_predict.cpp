// `lmsim predict`: one simulation with its breakdown, per-rank memory and (on request) diagnostics.
#include <iostream>

#include "apps/common.hpp"

namespace lmsim::app {

namespace {
RunOptions opt;
std::string strategy_name;
bool diagnostics = false, allow_uneven = false, allow_cross_node = false;
std::string gemm_csv;

io::Json breakdown_json(const Breakdown& b) {
  return io::Json{{"compute_s", b.compute_s},
                  {"recompute_s", b.recompute_s},
                  {"tp_comm_s", b.tp_comm_s},
                  {"tp_comm_overlapped_s", b.tp_comm_overlapped_s},
                  {"cp_comm_exposed_s", b.cp_comm_exposed_s},
                  {"cp_comm_overlapped_s", b.cp_comm_overlapped_s},
                  {"ep_comm_s", b.ep_comm_s},
                  {"pp_comm_s", b.pp_comm_s},
                  {"dp_comm_exposed_s", b.dp_comm_exposed_s},
                  {"dp_comm_overlapped_s", b.dp_comm_overlapped_s},
                  {"bubble_s", b.bubble_s},
                  {"optimizer_s", b.optimizer_s}};
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
    j["iteration_time_s"] = p.iteration_time_s;
    j["peak_memory_bytes"] = mem;
    j["max_peak_memory_bytes"] = p.max_peak_memory_bytes;
    j["capacity_bytes"] = p.capacity_bytes;
    j["feasible"] = p.feasible;
    j["num_micro_batches"] = p.num_micro_batches;
    j["breakdown"] = breakdown_json(p.breakdown);
    io::Json stages = io::Json::array();
    for (int i = 0; i < p.num_stages; ++i) {
      const StageResult& st = p.stages[static_cast<std::size_t>(i)];
      stages.push_back({{"stage", i},
                        {"first_layer", st.first_layer},
                        {"num_layers", st.num_layers},
                        {"per_microbatch_s", st.per_microbatch_s},
                        {"forward_compute_s", st.forward_compute_s},
                        {"backward_compute_s", st.backward_compute_s},
                        {"recompute_s", st.recompute_s},
                        {"tp_comm_s", st.tp_comm_s},
                        {"tp_comm_overlapped_s", st.tp_comm_overlapped_s},
                        {"cp_comm_overlapped_s", st.cp_comm_overlapped_s},
                        {"dp_comm_overlapped_s", st.dp_comm_overlapped_s},
                        {"cp_comm_exposed_s", st.cp_comm_exposed_s},
                        {"ep_comm_s", st.ep_comm_s},
                        {"pp_comm_s", st.pp_comm_s},
                        {"dp_comm_exposed_s", st.dp_comm_exposed_s},
                        {"optimizer_s", st.optimizer_s},
                        {"memory",
                         {{"weight_bytes", st.weight_bytes},
                          {"gradient_bytes", st.gradient_bytes},
                          {"optimizer_bytes", st.optimizer_bytes},
                          {"activation_bytes", st.activation_bytes},
                          {"transient_bytes", st.transient_bytes},
                          {"runtime_bytes", st.runtime_bytes},
                          {"peak_bytes", st.peak_bytes},
                          {"inflight_microbatches", st.inflight_microbatches}}}});
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
                       {"bytes", c.bytes},
                       {"count", c.count},
                       {"predicted_ms", c.predicted_ms}});
    j["collectives"] = colls;
    std::cout << j.dump(1) << "\n";
    return;
  }
  std::cout << r.model.name << " on " << s.devices() << " x " << r.system.name << ", " << config_name(s) << " (seq "
            << r.settings.seq_length << ", global batch " << r.settings.global_batch_size << ", " << p.num_micro_batches
            << " micro-batches of " << resolve(s, r.settings).micro_batch_size << ")\n"
            << "iteration time  " << fmt(p.iteration_time_s, 3) << " s\n"
            << "peak memory     " << gib(p.max_peak_memory_bytes) << " GiB (stage " << p.peak_stage << ") of "
            << gib(p.capacity_bytes) << " GiB: " << (p.feasible ? "fits" : "DOES NOT FIT") << "\n\n";
  const Breakdown& b = p.breakdown;
  std::cout << table({"component", "seconds"},
                     {{"compute (fwd+bwd)", fmt(b.compute_s)},
                      {"recompute", fmt(b.recompute_s)},
                      {"TP comm exposed / overlapped", fmt(b.tp_comm_s) + " / " + fmt(b.tp_comm_overlapped_s)},
                      {"CP comm exposed / overlapped", fmt(b.cp_comm_exposed_s) + " / " + fmt(b.cp_comm_overlapped_s)},
                      {"EP all-to-all", fmt(b.ep_comm_s)},
                      {"PP p2p", fmt(b.pp_comm_s)},
                      {"pipeline bubble", fmt(b.bubble_s)},
                      {"DP comm exposed / overlapped", fmt(b.dp_comm_exposed_s) + " / " + fmt(b.dp_comm_overlapped_s)},
                      {"optimizer", fmt(b.optimizer_s)}})
            << "\n";
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
      c.push_back({x.primitive, x.group, std::to_string(x.stage), std::to_string(x.group_size),
                   fmt(x.bytes / 1048576.0, 2), fmt(x.count, 0), fmt(x.predicted_ms, 3)});
    std::cout << "\n" << table({"collective", "group", "stage", "size", "MiB", "calls", "ms/call"}, c);
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
  cmd->add_option("--gemms-csv", gemm_csv, "write the predicted GEMMs as a matrix_operator_latency-style CSV");
  cmd->add_flag("--allow-uneven-layers", allow_uneven, "let pipeline stages differ by one layer");
  cmd->add_flag("--allow-cross-node-tp", allow_cross_node, "allow tensor-parallel groups across nodes");
  cmd->callback(run);
}

}  // namespace lmsim::app
