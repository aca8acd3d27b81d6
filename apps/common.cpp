#include "apps/common.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

#include "io/hash.hpp"
#include "lmsim_commit.hpp"  // LMSIM_COMMIT, generated at build time

namespace lmsim::app {

const CLI::Validator& positive_size() {
  static const CLI::Validator v(
      [](std::string& s) -> std::string {
        double x = 0;
        if (!io::parse_number(s, x) || x < 1 || x != static_cast<double>(static_cast<std::int64_t>(x)))
          return "'" + s + "' is not a positive integer (a size given is a size: 0 does not mean the default)";
        return "";
      },
      "POSITIVE");
  return v;
}

// `--stack NAME`: the names and summaries come from the stack table (presets/stacks.json); an unknown name is
// refused when the options are parsed, naming the stacks.
void add_stack_option(CLI::App& cmd, std::string& stack) {
  // The names only: each stack's summary is a paragraph, which `lmsim stacks` prints (once in every subcommand's
  // --help, they buried the other options).
  std::string help = "a software stack's training settings (--settings, --set and the strategy name override them): ";
  try {
    std::vector<std::string> names;
    for (const auto& st : io::presets().stacks) names.push_back(st.name);
    help += join(names) + "; `lmsim stacks` says what each sets";
  } catch (const std::exception&) {
    help += "see data/presets/stacks.json";
  }
  cmd.add_option("--stack", stack, help)
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            return io::presets().find_stack(name) ? std::string() : io::unknown_stack(name);
          },
          "STACK"));
}

void add_run_options(CLI::App& cmd, RunOptions& o, bool need_devices) {
  cmd.add_option("--model", o.model, "model preset name or model JSON file")->required();
  cmd.add_option("--system", o.system, "system preset name or system JSON file")->required();
  // A size given on the command line is a size: 0 is refused, never read as "use the default".
  auto* d = cmd.add_option("--devices", o.device_counts,
                           "number of devices (default: product of the degrees); several (comma-separated) compare the "
                           "strategies at each, dp following from the count where a strategy leaves it out")
                ->check(positive_size())
                ->delimiter(',');
  if (need_devices) d->required();
  cmd.add_option("--seq", o.seq, "sequence length (default 4096)")->check(positive_size());
  cmd.add_option("--global-batch", o.global_batch, "global batch size in sequences (default 32)")
      ->check(positive_size());
  cmd.add_option("--micro-batch", o.micro_batch, "micro-batch size (default 1)")->check(positive_size());
  cmd.add_option(
      "--params", o.params_file,
      "θ file written by `lmsim calibrate` (default: the fitted θ shipped for the system, else its uncalibrated "
      "preset defaults)");
  cmd.add_option("--settings", o.settings_file, "training settings JSON (precision, flash_attention, ...)");
  add_stack_option(cmd, o.platform_stack);
  add_set_option(cmd, o.set_settings);
  cmd.add_flag("--json", o.json, "machine-readable output on stdout");
}

void add_set_option(CLI::App& cmd, std::vector<std::string>& set) {
  cmd.add_option("--set", set,
                 "KEY=VALUE (repeatable): one training setting as the settings JSON spells it "
                 "(distribute_saved_activations=true, cp_comm_type=a2a, recompute_modules=[\"mlp\"]), over --stack "
                 "and --settings");
}

io::Json settings_of_set(const std::vector<std::string>& set, const std::string& option) {
  io::Json j = io::Json::object();
  for (const std::string& pair : set) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      throw io::InputError(option, 0, pair, "expected KEY=VALUE, as the settings JSON spells the key");
    const std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    io::Json v = io::Json::parse(value, nullptr, false);
    j[key] = v.is_discarded() ? io::Json(value) : v;
  }
  return j;
}

namespace {
// `text` split at the commas outside brackets, braces and quotes, so that a JSON list is one value.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> out(1);
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '\\' && i + 1 < text.size()) {
      out.back() += c;
      out.back() += text[++i];
      continue;
    }
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && !quoted && depth == 0)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}
}  // namespace

std::vector<VariedSetting> varied_settings(const std::vector<std::string>& vary, const std::vector<std::string>& set,
                                           const std::vector<std::pair<std::string, std::string>>& elsewhere) {
  std::vector<VariedSetting> out;
  for (const std::string& arg : vary) {
    const auto eq = arg.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
      throw io::InputError("command line", 0, "--vary", "'" + arg + "': expected KEY=VALUE[,VALUE...]");
    const std::string key = arg.substr(0, eq);
    for (const auto& [k, option] : elsewhere)
      if (key == k) throw io::InputError("command line", 0, "--vary", key + " has its own option: " + option);
    for (const std::string& pair : set)
      if (pair.compare(0, key.size() + 1, key + "=") == 0)
        throw io::InputError("command line", 0, "--vary", key + " is also fixed by --set " + pair);
    auto dim = std::find_if(out.begin(), out.end(), [&](const VariedSetting& d) { return d.key == key; });
    if (dim == out.end()) dim = out.insert(out.end(), VariedSetting{key, {}});
    for (const std::string& value : split_top_level(arg.substr(eq + 1))) {
      if (value.empty()) throw io::InputError("command line", 0, "--vary", "'" + arg + "': an empty value");
      // The key and the value alone; how they sit with the other settings is each combination's to say.
      io::settings_from_json(settings_of_set({key + "=" + value}, "--vary"), "--vary", "", TrainingSettings{}, false);
      if (std::find(dim->values.begin(), dim->values.end(), value) == dim->values.end()) dim->values.push_back(value);
    }
  }
  return out;
}

std::vector<std::vector<std::string>> combinations(const std::vector<VariedSetting>& dims) {
  std::vector<std::vector<std::string>> out(1);
  for (const VariedSetting& d : dims) {
    std::vector<std::vector<std::string>> next;
    for (const auto& partial : out)
      for (const std::string& v : d.values) {
        next.push_back(partial);
        next.back().push_back(d.key + "=" + v);
      }
    out = std::move(next);
  }
  return out;
}

std::optional<calib::Uncertainty> load_uncertainty(const io::Json& j, const std::string& theta_file) {
  if (!j.is_object() || !j.contains("uncertainty")) return std::nullopt;
  const io::Json& u = j["uncertainty"];
  calib::UncertaintyJson f;
  try {
    f.free = u.at("free").get<std::vector<std::string>>();
    f.covariance = u.at("covariance").get<std::vector<std::vector<double>>>();
    f.time_log_sd = u.at("time_log_sd").get<double>();
    f.memory_log_sd = u.at("memory_log_sd").get<double>();
    f.prior_only = u.value("prior_only", std::vector<std::string>{});  // absent before 2026-11-30
    f.n_time = u.value("n_time", std::size_t{0});
    f.n_memory = u.value("n_memory", std::size_t{0});
    // Absent in θ files written before the degrees of freedom were recorded: normal quantiles.
    f.time_dof = u.value("time_dof", 0.0);
    f.memory_dof = u.value("memory_dof", 0.0);
    if (u.contains("unseen_model")) {  // absent before 2026-11-30, and when no model was held out
      const io::Json& h = u["unseen_model"];
      f.unseen_time_log_sd = h.at("time_log_sd").get<double>();
      f.unseen_memory_log_sd = h.at("memory_log_sd").get<double>();
      f.unseen_n_time = h.at("n_time").get<std::size_t>();
      f.unseen_n_memory = h.at("n_memory").get<std::size_t>();
    }
    if (u.contains("extrapolation")) {  // absent before 2026-11-30, and when no dimension could be held out
      const io::Json& h = u["extrapolation"];
      f.extrapolation_time_log_sd = h.at("time_log_sd_per_log_unit").get<double>();
      f.extrapolation_memory_log_sd = h.at("memory_log_sd_per_log_unit").get<double>();
      f.extrapolation_n_time = h.at("n_time").get<std::size_t>();
      f.extrapolation_n_memory = h.at("n_memory").get<std::size_t>();
      f.extrapolation_from = h.value("taken_from", std::string());  // absent before 2026-12-06: measured
    }
  } catch (const io::Json::exception& e) {
    throw io::InputError(theta_file, 0, "uncertainty", std::string("malformed: ") + e.what());
  }
  return calib::from_json_form(f, theta_file);
}

io::Json uncertainty_json(const calib::Uncertainty& u) {
  const calib::UncertaintyJson f = calib::to_json_form(u);
  io::Json j{{"method", "Laplace (Gauss-Newton) approximation of the posterior at the MAP fit"},
             {"free", f.free},
             {"covariance", f.covariance},
             {"time_log_sd", f.time_log_sd},
             {"memory_log_sd", f.memory_log_sd},
             {"n_time", u.n_time},
             {"n_memory", u.n_memory},
             {"time_dof", u.time_dof},
             {"memory_dof", u.memory_dof}};
  if (!f.prior_only.empty()) {
    j["prior_only"] = f.prior_only;
    j["prior_only_what"] =
        "parameters the fit never saw (its runs could not identify them, or --free left them out), held at their "
        "prior centre with the prior's variance, which a prediction that depends on them carries; without memory "
        "measurements memory_log_sd is the objective's stated per-run error, not a measured one";
  }
  if (f.unseen_n_time + f.unseen_n_memory > 0)
    j["unseen_model"] = {
        {"what",
         "root-mean-square log error of the held-out predictions of the leave-one-model-out (or -source-out) "
         "cross-validation: the residual scale of a model outside the fitted runs"},
        {"time_log_sd", f.unseen_time_log_sd},
        {"memory_log_sd", f.unseen_memory_log_sd},
        {"n_time", f.unseen_n_time},
        {"n_memory", f.unseen_n_memory}};
  if (f.extrapolation_n_time + f.extrapolation_n_memory > 0)
    j["extrapolation"] = {
        {"what",
         "how fast the error grows beyond the fitted runs' range, measured by holding out each dimension's extreme "
         "runs (largest and smallest sequence, devices, TP, PP, CP, EP, hidden size and routed expert count) and "
         "predicting them from a fit on the rest: log sd per unit of log distance outside the range, in excess of the "
         "fitted runs' residual scale; a prediction outside the range adds (this x its log distance)^2 to its "
         "residual variance"},
        {"time_log_sd_per_log_unit", f.extrapolation_time_log_sd},
        {"memory_log_sd_per_log_unit", f.extrapolation_memory_log_sd},
        {"n_time", f.extrapolation_n_time},
        {"n_memory", f.extrapolation_n_memory}};
  if (!f.extrapolation_from.empty()) {
    j["extrapolation"]["taken_from"] = f.extrapolation_from;
    j["extrapolation"]["taken_why"] =
        "the fitted runs had no dimension with extremes to hold out, so the scale is the one measured for the θ this "
        "fit started from, which is also its prior's centre";
  }
  return j;
}

std::optional<ThetaFit> theta_fit(const io::Json& j, const std::string& file, const Model* model) {
  if (!j.is_object() || !j.contains("provenance") || !j["provenance"].is_object()) return std::nullopt;
  const io::Json& p = j["provenance"];
  if (!p.contains("configurations") || !p["configurations"].is_array()) return std::nullopt;
  ThetaFit f;
  for (const auto& c : p["configurations"]) {  // "<model or model setting>:<configuration>"
    if (!c.is_string()) continue;
    const std::string text = c.get<std::string>();
    f.configurations.push_back(text);
    std::string name = text.substr(0, text.find(':'));
    if (const auto ms = io::find_model_setting(name); ms && !ms->model.empty()) name = ms->model;
    if (std::find(f.models.begin(), f.models.end(), name) == f.models.end()) f.models.push_back(name);
  }
  if (f.models.empty()) return std::nullopt;
  if (p.contains("models") && p["models"].is_array())
    for (std::size_t i = 0; i < p["models"].size(); ++i)
      f.model_specs.push_back(io::model_from_json(p["models"][i], file, fmt::format("provenance.models[{}]", i)));
  if (const auto as = model ? eval::fitted_as(f.models, f.model_specs, *model) : std::nullopt) {
    f.includes_model = true;
    if (*as != model->name) f.fitted_as = *as;
  }
  auto mape = [](const io::Json& r) {
    return r.is_object() && r.contains("time_mape_pct") && r["time_mape_pct"].is_number()
               ? r["time_mape_pct"].get<double>()
               : std::nan("");
  };
  if (p.contains("fitted_range") && p["fitted_range"].is_object())
    for (const auto& d : kRangeDims) {
      const io::Json& r = p["fitted_range"];
      if (r.contains(d.name) && r[d.name].is_array() && r[d.name].size() == 2 && r[d.name][0].is_number() &&
          r[d.name][1].is_number())
        f.range.push_back({d.name, {r[d.name][0].get<double>(), r[d.name][1].get<double>()}});
    }
  if (j.contains("report") && j["report"].is_object()) {
    const io::Json& rep = j["report"];
    if (rep.contains("in_sample")) f.in_sample_time_mape_pct = mape(rep["in_sample"]);
    if (rep.contains("cv") && rep["cv"].is_object()) {
      f.held_out_time_mape_pct = mape(rep["cv"]);
      if (rep["cv"].contains("kind") && rep["cv"]["kind"].is_string()) f.held_out_kind = rep["cv"]["kind"];
    }
  }
  return f;
}

io::Json fitted_range_json(const calib::Problem& pb, const std::vector<std::size_t>& idx) {
  io::Json out = io::Json::object();
  for (const auto& [name, r] : calib::fitted_range(pb, idx)) out[name] = {r[0], r[1]};
  return out;
}

std::vector<std::pair<std::string, double>> range_values(const Model& m, const Strategy& s, const TrainingSettings& t) {
  std::vector<std::pair<std::string, double>> v;
  for (const auto& d : kRangeDims) v.push_back({d.name, d.of(m, s, t)});
  return v;
}

std::string no_fused_attention(const System& s) {
  return "(" + s.device +
         "), which runs neither FlashAttention-2 nor cuDNN fused attention (they need compute capability 8.0); only "
         "a memory-efficient kernel such as PyTorch's SDPA would";
}

std::string widening_said(const std::optional<calib::Uncertainty>& u) {
  if (!u || u->extrapolation_n_time == 0)
    return ", and the intervals do not widen for it (θ records no extrapolation scale)";
  if (!u->extrapolation_from.empty())
    return fmt::format(
        "; the intervals widen by {:.1f} % log sd per e-fold beyond it, the rate measured for {} ({} held-out "
        "predictions), which θ started from: its own runs were too few to measure one",
        100 * u->extrapolation_time_log_sd, u->extrapolation_from, u->extrapolation_n_time);
  return fmt::format(
      "; the intervals widen by {:.1f} % log sd per e-fold beyond it, the rate at which θ's calibration missed its "
      "own runs' extreme values when they were held out ({} predictions)",
      100 * u->extrapolation_time_log_sd, u->extrapolation_n_time);
}

std::vector<std::string> outside_fitted_range(const eval::FittedRange& range,
                                              const std::vector<std::pair<std::string, double>>& values) {
  return outside_fitted_range(range, std::vector<std::vector<std::pair<std::string, double>>>{values});
}

std::vector<std::string> outside_fitted_range(const eval::FittedRange& range,
                                              const std::vector<std::vector<std::pair<std::string, double>>>& runs) {
  std::vector<std::string> out;
  std::vector<std::string> order;  // dimensions in the order the runs give them
  std::map<std::string, std::pair<double, double>> beyond;
  for (const auto& values : runs)
    for (const auto& [name, v] : values)
      for (const auto& [dim, r] : range)
        if (dim == name && (v < r[0] || v > r[1])) {
          auto [it, fresh] = beyond.try_emplace(name, v, v);
          if (fresh) order.push_back(name);
          it->second = {std::min(it->second.first, v), std::max(it->second.second, v)};
        }
  for (const auto& name : order) {
    const auto [lo, hi] = beyond[name];
    const auto& r = std::find_if(range.begin(), range.end(), [&](const auto& d) { return d.first == name; })->second;
    out.push_back(lo == hi ? fmt::format("{} {:.0f} (fitted {:.0f}-{:.0f})", name, lo, r[0], r[1])
                           : fmt::format("{} {:.0f}-{:.0f} (fitted {:.0f}-{:.0f})", name, lo, hi, r[0], r[1]));
  }
  return out;
}

void warn_if_other_stack(const io::Json& j, const std::string& theta_file, const TrainingSettings& now) {
  if (!j.is_object() || !j.contains("provenance") || !j["provenance"].is_object()) return;
  const io::Json& p = j["provenance"];
  if (!p.contains("training_settings") || !p["training_settings"].is_object()) return;
  const io::Json cur = io::to_json(now);
  std::string diff;
  for (auto it = p["training_settings"].begin(); it != p["training_settings"].end(); ++it)
    if (cur.contains(it.key()) && cur[it.key()] != it.value())
      diff +=
          (diff.empty() ? "" : ", ") + it.key() + " " + cur[it.key()].dump() + " (fitted: " + it.value().dump() + ")";
  if (!diff.empty()) spdlog::warn("θ {} was fitted under other training settings: {}", theta_file, diff);
}

void say_fitted_stacks(const io::Json& theta, const std::string& theta_label, const std::string& stack,
                       bool settings_given, const TrainingSettings& t) {
  std::vector<std::string> stacks_of_theta;
  if (theta.is_object() && theta.contains("provenance") && theta["provenance"].is_object() &&
      theta["provenance"].contains("stacks") && theta["provenance"]["stacks"].is_array())
    for (const auto& n : theta["provenance"]["stacks"])
      if (n.is_string()) stacks_of_theta.push_back(n.get<std::string>());
  if (stacks_of_theta.empty()) return;
  const std::string fitted_on = fmt::format("{}", fmt::join(stacks_of_theta, " or "));
  if (stack.empty() && !settings_given)
    spdlog::info(
        "training settings: lmsim's defaults ({}); {} was fitted on runs of the {} stack: --stack {} predicts as "
        "those runs ran",
        fmt::format("{}, {}SP, {}TP communication overlap, {}overlapped parameter gather", to_string(t.precision),
                    t.sequence_parallel ? "" : "no ", t.tp_comm_overlap ? "" : "no ",
                    t.overlap_param_gather ? "" : "no "),
        theta_label, fitted_on, stacks_of_theta.front());
  else if (!stack.empty() && std::find(stacks_of_theta.begin(), stacks_of_theta.end(), stack) == stacks_of_theta.end())
    spdlog::info(
        "{} was fitted on runs of the {} stack, not {}: where their settings differ, the prediction rests on the "
        "modelled effect of each setting, not on runs that had it",
        theta_label, fitted_on, stack);
}

io::Dataset read_dataset_warned(const std::string& root) {
  io::Dataset d = io::read_dataset(root);
  for (const auto& c : d.collections) {
    if (!c.settings_contradicted.empty())
      spdlog::warn("{}: recorded settings contradicted: {}", c.directory, c.settings_contradicted);
    if (c.settings_recorded) continue;
    // Assumed settings are said, with what the runs themselves showed: every figure on them rests on the reading.
    const bool stack = c.platform == "gpu" || c.platform == "npu";  // as io::read_dataset takes them
    spdlog::info(
        "{}: no training_settings.json: {}{}{}", c.directory,
        stack ? fmt::format("the {} platform's stack assumed (--stack {}, `lmsim stacks`)", c.platform, c.platform)
              : std::string("lmsim's default training settings assumed"),
        c.settings_inferred.empty() ? "" : "; read from its own runs: ", c.settings_inferred);
  }
  return d;
}

namespace {

// The settings that exist only at some precisions: FP8 parameter gathering needs FP8 parameters, the reused master
// copy bf16 ones (settings_problem refuses either elsewhere).
struct PrecisionBound {
  bool TrainingSettings::*member;
  const char* name;
  bool (*runs_at)(Precision);
  const char* why;
};
const PrecisionBound kPrecisionBound[] = {
    {&TrainingSettings::fp8_param_gather, "fp8_param_gather", [](Precision p) { return quantizes_linear(p); },
     "it gathers FP8 or FP4 parameters"},
    {&TrainingSettings::reuse_fp32_param, "reuse_fp32_param", [](Precision p) { return p != Precision::fp16; },
     "it needs bf16 parameters"},
};

// Sets the precision and turns off the settings bound to another one, as Megatron-Bridge's mixed-precision recipes
// set them together, except those `named` names (an override's own, kept so that a contradiction is refused).
// Returns what it turned off, for the log.
std::string set_precision(TrainingSettings& t, Precision p, const io::Json& named = io::Json::object()) {
  t.precision = p;
  std::string off;
  for (const PrecisionBound& b : kPrecisionBound)
    if (t.*b.member && !b.runs_at(p) && !named.contains(b.name)) {
      t.*b.member = false;
      off += std::string(off.empty() ? "" : ", ") + b.name + " off (" + b.why + ")";
    }
  return off;
}

// A precision an override (--settings, --set) sets carries the stack's settings bound to another one with it.
void follow_precision(const io::Json& j, TrainingSettings& t, const std::string& source) {
  if (!j.is_object() || !j.contains("precision") || !j["precision"].is_string()) return;
  const std::string name = j["precision"].get<std::string>();
  for (const Precision p : {Precision::fp16, Precision::bf16, Precision::fp8, Precision::fp4})
    if (name == to_string(p))
      if (const std::string off = set_precision(t, p, j); !off.empty())
        spdlog::info("{}: precision {}: {}", source, name, off);
}

}  // namespace

TrainingSettings stack_settings_on(const std::string& stack, const System& sys) {
  TrainingSettings t;
  if (!stack.empty()) {
    const io::StackPreset& st = io::resolve_stack(stack);
    t = st.settings;
    // A stack's FP8 (FP4) recipe on a device without FP8 (FP4) units runs its linear layers in BF16 (FP16 where
    // BF16 is absent).
    if (sys.peak_flops(t.precision) <= 0 && quantizes_linear(t.precision)) {
      const std::string was = t.precision == Precision::fp4 ? "FP4" : "FP8";
      const std::string off = set_precision(t, sys.peak_flops_bf16 > 0 ? Precision::bf16 : Precision::fp16);
      spdlog::info("stack {} runs {} linear layers; {} has no {} units: {} instead{}{}", st.name, was, sys.name, was,
                   to_string(t.precision), off.empty() ? "" : "; ", off);
    }
  } else {
    if (sys.peak_flops_bf16 <= 0) t.precision = Precision::fp16;
    if (!sys.fused_attention) t.flash_attention = false;
  }
  return t;
}

TrainingSettings with_settings_options(TrainingSettings t, const std::string& settings_file,
                                       const std::vector<std::string>& set, const System& sys) {
  if (!settings_file.empty()) {
    const io::Json j = io::parse_json_file(settings_file);
    follow_precision(j, t, settings_file);
    t = io::settings_from_json(j, settings_file, "", t);
  }
  if (!set.empty()) {
    const io::Json j = settings_of_set(set);
    follow_precision(j, t, "--set");
    t = io::settings_from_json(j, "--set", "", t);
  }
  if (t.flash_attention && !sys.fused_attention)
    spdlog::warn("{}: flash_attention true on {} {}", settings_file.empty() ? sys.name : settings_file, sys.name,
                 no_fused_attention(sys));
  return t;
}

TrainingSettings resolve_settings(const RunOptions& o, const System& sys) {
  TrainingSettings t =
      with_settings_options(stack_settings_on(o.platform_stack, sys), o.settings_file, o.set_settings, sys);
  if (o.seq < 0 || o.global_batch < 0 || o.micro_batch < 0 || o.devices < 0)
    throw io::InputError("command line", 0, "", "sizes must be positive");
  if (o.seq) t.seq_length = o.seq;
  if (o.global_batch) t.global_batch_size = o.global_batch;
  if (o.micro_batch) t.micro_batch_size = o.micro_batch;
  if (auto why = validate(t); !why.empty()) throw io::InputError("command line", 0, "", why);
  if (const auto problem = precision_problem(sys, t))  // a missing precision is the system file's peak_tflops
    throw io::InputError(o.system, 0, problem->field == "precision" ? "peak_tflops" : problem->field,
                         "system " + problem->why + " in --settings or --set");
  return t;
}

std::string mfu_precision_note(const std::vector<Precision>& rows) {
  for (const Precision p : rows)
    if (p != rows.front())
      return "MFU %: against each row's own precision peak (FP8 and FP4 rows against their dense peak); compare such "
             "rows "
             "by time\n";
  return {};
}

TrainingSettings resolve_varied_settings(const RunOptions& o, const std::vector<std::string>& combo,
                                         const System& sys) {
  RunOptions varied = o;
  varied.set_settings.insert(varied.set_settings.end(), combo.begin(), combo.end());
  try {
    return resolve_settings(varied, sys);
  } catch (const io::InputError& e) {
    throw io::InputError("command line", 0, "--vary", sys.name + ", " + join(combo) + ": " + e.why());
  }
}

Resolved resolve(const RunOptions& o) {
  Resolved r;
  r.model = io::resolve_model(o.model);
  r.system = io::resolve_system(o.system, &r.params, &r.params_source);
  r.settings = resolve_settings(o, r.system);
  std::string theta_file = o.params_file, prior_file;
  if (const io::SystemPreset* sp = io::presets().find_system(o.system); sp && theta_file.empty()) {
    theta_file = sp->calibrated_path;
    if (theta_file.empty()) prior_file = sp->prior_path;  // uncalibrated, its defaults another system's fit (or none)
  }
  r.params_file = theta_file;
  const io::Json theta_json = theta_file.empty() ? io::Json() : io::parse_json_file(theta_file);  // read once
  // θ was fitted on runs of the stacks its provenance records (for uncalibrated defaults taken from another system's
  // fit, that fit's). Said when the settings are lmsim's generic defaults (which stack reproduces those runs) or
  // another stack's (its effects modelled, not fitted).
  const io::Json stacks_json = prior_file.empty() ? theta_json : io::parse_json_file(prior_file);
  say_fitted_stacks(stacks_json,
                    !prior_file.empty()     ? "the fit " + r.system.name + "'s defaults come from"
                    : o.params_file.empty() ? "the shipped θ for " + r.system.name
                                            : "θ " + o.params_file,
                    o.platform_stack, !o.settings_file.empty() || !o.set_settings.empty(), r.settings);
  if (!theta_file.empty()) {
    warn_if_other_stack(theta_json, theta_file, r.settings);
    r.uncertainty = load_uncertainty(theta_json, theta_file);
    r.fit = theta_fit(theta_json, theta_file, &r.model);
  }
  if (!o.params_file.empty()) {
    r.params = io::load_params(o.params_file, r.params);
    r.params_source = "θ file " + o.params_file;
    const io::Json& j = theta_json;
    if (j.is_object() && j.contains("provenance") && j["provenance"].is_object() &&
        j["provenance"].contains("system") && j["provenance"]["system"].is_string()) {
      const std::string fitted_on = j["provenance"]["system"].get<std::string>();
      r.params_source += " (fitted on " + fitted_on + ")";
      if (fitted_on != r.system.name)
        spdlog::warn("θ file {} was fitted on {}, not on {}: its efficiencies and latencies describe another machine",
                     o.params_file, fitted_on, r.system.name);
    }
  }
  if (auto why = validate(r.params); !why.empty()) throw io::InputError(o.params_file, 0, "", why);
  if (r.model.is_moe())
    spdlog::warn(
        "{} is a mixture of experts: the MoE layer's host-side work (router bookkeeping, the dropless dispatcher's "
        "device-to-host synchronisation) is not modelled; with the shipped θ seven of the eight published MoE runs "
        "are under-predicted, by 16-56 % (README, validation rows; data/public/NOTE.md); a θ fitted on dense runs "
        "widens its intervals for the expert count, and its 90 % intervals held 4 of those 8 runs",
        r.model.name);
  if (theta_file.empty()) {
    // No θ file: the system's uncalibrated defaults, which no run calibrated; their intervals are what the priors
    // state (calib::prior_uncertainty).
    r.uncertainty = calib::prior_uncertainty();
    spdlog::warn(
        "using {}: no θ was fitted for this system; predictions are uncalibrated, and their intervals are the "
        "calibration priors' widths, not measured errors",
        r.params_source);
  } else
    spdlog::info("using {}", r.params_source);
  // Predicting a model θ never saw is the common case and an extrapolation: say how far held-out runs missed, and
  // let the intervals take the held-out runs' residual scale when the calibration measured one.
  if (r.fit && !r.fit->fitted_as.empty())
    spdlog::info("{} has the architecture of {}, one of the models θ was fitted on", r.model.name, r.fit->fitted_as);
  if (r.fit && !r.fit->includes_model) {
    const std::string models = join(r.fit->models);
    std::string held_out;
    if (std::isfinite(r.fit->held_out_time_mape_pct))
      held_out = fmt::format("; on held-out runs ({}) its time MAPE was {:.1f} %",
                             r.fit->held_out_kind == "loo" ? "leave-one-configuration-out" : r.fit->held_out_kind,
                             r.fit->held_out_time_mape_pct);
    std::string scale = "the intervals come from the fitted runs' residuals, so a new model's error can exceed them";
    if (r.uncertainty) {
      const calib::PredictionUncertainty u = calib::for_model(*r.uncertainty, false);
      r.uncertainty = u.u;
      r.held_out_scale = u.held_out_scale;
    }
    if (r.held_out_scale)
      scale = fmt::format(
          "the intervals take the larger of the fitted runs' residual scale and that of models held out of the fit "
          "({:.1f} % log-sd, {} held-out runs)",
          100 * r.uncertainty->time_log_sd, r.uncertainty->unseen_n_time);
    spdlog::info("{} is not among the models θ was fitted on ({}){}; {}", r.model.name, models, held_out, scale);
  }
  return r;
}

const CLI::Validator& finite_number() {
  static const CLI::Validator v(
      [](std::string& text) {
        double d = 0;
        if (!io::parse_number(text, d) || !std::isfinite(d))
          return std::string("'" + text + "' is not a finite number");
        return std::string();
      },
      "FINITE");
  return v;
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(header.size());
  for (std::size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const std::string& c = i < r.size() ? r[i] : std::string();
      out += c + std::string(w[i] - c.size() + (i + 1 < w.size() ? 2 : 0), ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  line(header);
  std::vector<std::string> sep;
  for (auto x : w) sep.push_back(std::string(x, '-'));
  line(sep);
  for (const auto& r : rows) line(r);
  return out;
}

std::string fmt(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}
std::string gib(double bytes) { return fmt(bytes / 1073741824.0, 2); }
std::string grouped(double v) {
  if (!(std::fabs(v) < 1e21)) return fmt::format("{:.4g}", v);  // past 21 digits (or not finite): 1.234e+21
  std::string digits = fmt(std::fabs(v), 0), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 && digits != "0" ? "-" : "") + out;
}

namespace {
std::string& current_command_line() {
  static std::string s;
  return s;
}
}  // namespace

void set_command_line(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    const bool quote = a.empty() || a.find_first_of(" \t'\"") != std::string::npos;
    s += (s.empty() ? "" : " ") + (quote ? "'" + a + "'" : a);
  }
  current_command_line() = s;
}
const std::string& command_line() { return current_command_line(); }

io::Json provenance_json(const std::vector<std::string>& theta_files) {
  io::Json files = io::Json::array();
  for (const auto& f : theta_files)
    if (!f.empty()) files.push_back({{"path", f}, {"sha256", io::sha256_file(f)}});
  char utc[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"command_line", command_line()},
          {"lmsim_version", LMSIM_VERSION},
          {"lmsim_commit", LMSIM_COMMIT},
          {"data_dir", io::data_dir()},
          {"created_utc", utc},
          {"theta_files", files}};
}

void write_provenance(io::H5Writer& w, const std::string& object, const std::vector<std::string>& theta_files) {
  const io::Json p = provenance_json(theta_files);
  for (const char* k : {"command_line", "lmsim_version", "lmsim_commit", "data_dir", "created_utc"})
    w.attr(object, k, p[k].get<std::string>());
  w.attr(object, "theta_files_json", p["theta_files"].dump());
}

}  // namespace lmsim::app
