// lmsim/io/specs.hpp — JSON specs for models, systems, training settings and platform parameters, and presets.
//
// Owns: strict JSON <-> value-type conversion (unknown keys, missing keys, wrong types, negative / NaN / absurd
// values are InputErrors naming the file and the JSON path of the field), the preset registry under
// <data>/presets/, and where the data folder is.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "simulator/simulator.hpp"

namespace lmsim::io {

using Json = nlohmann::ordered_json;

// A model preset also carries the model card's published totals, for checking the parameter count.
struct ModelPreset {
  Model model;
  double card_total_params = 0;  // 0: not published
  double card_active_params = 0;
  std::string source;
};
struct SystemPreset {
  System system;
  PlatformParams default_params;  // the preset's uncalibrated guess: the calibration prior and start
  std::string source;
  // θ fitted to measurements of this system and shipped with lmsim (systems.json `calibrated_params`); empty
  // file: none. Predictions use it by default.
  PlatformParams calibrated_params;
  std::string calibrated_file;  // as shown: "data/params/..."
  std::string calibrated_path;  // the file read
  // A system no run calibrated may centre its prior, and so its uncalibrated defaults, on another system's shipped
  // fit (systems.json `prior_params`, with `prior_note` saying why the values carry over: the same GPU). Empty: the
  // preset's own guesses.
  std::string prior_file, prior_path, prior_note;  // as shown, as read, why
  const PlatformParams& params() const { return calibrated_file.empty() ? default_params : calibrated_params; }
  std::string params_source() const {
    if (!calibrated_file.empty()) return "fitted θ shipped for " + system.name + " (" + calibrated_file + ")";
    return "uncalibrated preset defaults of " + system.name +
           (prior_file.empty() ? "" : " (the values of " + prior_file + ": " + prior_note + ")");
  }
};

Model model_from_json(const Json& j, const std::string& file, const std::string& path = "");
// A HuggingFace `config.json` (Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, Gemma-2, DeepSeek-V3 families).
// Another architecture, or a missing key, is an input error naming it.
Model model_from_hf_config(const Json& j, const std::string& file);
bool is_hf_config(const Json& j);
Json to_json(const Model& m);
System system_from_json(const Json& j, const std::string& file, const std::string& path = "",
                        PlatformParams* defaults = nullptr);
Json to_json(const System& s);
// The settings key (and readings.csv column) that sets hidden and attention dropout together, as one flag did before
// they were told apart; hidden_dropout / attention_dropout, where given too, win.
inline constexpr const char* kBothDropouts = "dropout";
// `j`'s keys over `base`, each checked (known, of its type, in range); with `consistent`, the result also as a whole
// (settings that contradict each other: fp8_param_gather without fp8, ...).
TrainingSettings settings_from_json(const Json& j, const std::string& file, const std::string& path = "",
                                    const TrainingSettings& base = {}, bool consistent = true);
Json to_json(const TrainingSettings& t);
// The selective-recompute modules in Megatron's spelling, in enum order (core_attn, layernorm, mlp, ...).
std::vector<std::string> recompute_module_names(const TrainingSettings& t);
// The linear layers LoRA adapts (lora_target_modules), by name; empty without LoRA.
std::vector<std::string> lora_target_names(const TrainingSettings& t);
// A context-parallel algorithm by Megatron-core's --cp-comm-type name (p2p, a2a, allgather, a2a+p2p) or
// MindSpeed-LLM's --context-parallel-algo name (megatron_cp_algo, ulysses_cp_algo, kvallgather_cp_algo,
// hybrid_cp_algo); nullopt otherwise, and then why, for the message (MindSpeed's adaptive CP is named as not
// modelled).
std::optional<CpCommType> parse_cp_comm_type(const std::string& name);
const char* mindspeed_cp_algo(CpCommType c);  // MindSpeed-LLM's --context-parallel-algo name
std::string cp_comm_type_problem(const std::string& name);
PlatformParams params_from_json(const Json& j, const std::string& file, const std::string& path = "",
                                const PlatformParams& base = {});
Json to_json(const PlatformParams& p);

Json parse_json_file(const std::string& file);

// The folder with presets and bundled data: $LMSIM_DATA_DIR; else <dir of the running binary>/../share/lmsim/data
// (an installed lmsim, wherever the tree was moved); else the source tree's data/ (a build tree); else the
// install prefix's share/lmsim/data (a program linking the installed libraries).
std::string data_dir();

// A software stack (presets/stacks.json, `--stack`): the training settings a framework's recipes run with.
struct StackPreset {
  std::string name;
  std::string summary;  // one line, for the help text
  std::string source;
  TrainingSettings settings;
  std::string settings_file;         // the bundled collection's file it was read from, or empty (inline settings)
  std::vector<std::string> systems;  // where the shipped θ was fitted on runs of this stack
  std::string describes;             // the published-data file whose readings use it (empty: none)
  std::vector<std::string> varies;   // settings those readings set per recipe rather than per stack
};
struct Presets {
  std::vector<ModelPreset> models;
  std::vector<SystemPreset> systems;
  std::vector<StackPreset> stacks;
  const ModelPreset* find_model(const std::string& name) const;
  const SystemPreset* find_system(const std::string& name) const;
  const StackPreset* find_stack(const std::string& name) const;
};
const Presets& presets();  // loaded once from data_dir()/presets
Presets load_presets(const std::string& dir);

// A stack by name; an unknown name is an input error (field `option`) saying `unknown_stack(name)`: the closest
// stack and all of them.
const StackPreset& resolve_stack(const std::string& name, const char* option = "--stack");
std::string unknown_stack(const std::string& name);
// The stack whose settings are exactly `t`'s (sizes aside: sequence, batch), or empty.
std::string matching_stack(const TrainingSettings& t);
// A model or system given as a preset name or a path to a JSON file; unknown names list what exists.
Model resolve_model(const std::string& name_or_file);
// The candidate closest to `name` (case-insensitive edit distance), or empty when none is close.
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);
System resolve_system(const std::string& name_or_file, PlatformParams* defaults = nullptr,
                      std::string* params_source = nullptr);
// θ from a params.json written by `lmsim calibrate` (or a bare object of parameters).
PlatformParams load_params(const std::string& file, const PlatformParams& base = {});
// The same from such a file's parsed contents `j` (`file` names it in errors).
PlatformParams params_of_theta_file(const Json& j, const std::string& file, const PlatformParams& base = {});

// Parses a strategy as typed on the command line (parse_strategy_spec: any field order, dp from `devices` when left
// out) or throws InputError naming `source` (a flag: the field itself).
Strategy parse_strategy(const std::string& name, const std::string& source = "--strategy", std::int64_t devices = 0);
// LM-SimBench's MoE names may count the data-parallel replicas outside the expert group: dp·tp·pp·cp·ep equals the
// device count (its Phi-3.5-MoE settings list dp 1 with tp and pp down to 1 on 16 devices). Megatron's
// data-parallel group is then dp·ep ranks, the expert group carved out of it. When `s` uses other than `devices`
// devices and that reading makes them add up, it is applied (dp multiplied by ep) and true returned.
bool fold_moe_replicas(Strategy& s, std::int64_t devices);

}  // namespace lmsim::io
