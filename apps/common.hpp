// lmsim/apps/common.hpp — helpers shared by the CLI's subcommands: output, tables, run options.
#pragma once

#include <array>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "calibration/calibrate.hpp"
#include "calibration/evaluate.hpp"
#include "calibration/uncertainty.hpp"
#include "io/io.hpp"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace lmsim::app {

// Options that fill TrainingSettings and θ for predict / search.
struct RunOptions {
  std::string model, system, params_file, settings_file, platform_stack;
  std::vector<std::string> set_settings;  // --set KEY=VALUE: training settings on top of the stack and the file
  int devices = 0;                        // the device count a prediction runs at (0: the strategy's degrees say it)
  std::vector<int> device_counts;         // --devices as given: predict compares its strategies at each
  std::int64_t seq = 0, global_batch = 0, micro_batch = 0;
  bool json = false;
};
void add_run_options(CLI::App& cmd, RunOptions& o, bool need_strategy_devices);
// `--stack NAME` from the stack table (presets/stacks.json), checked when parsed.
void add_stack_option(CLI::App& cmd, std::string& stack);
// `--set KEY=VALUE` (repeatable): one training setting, as the settings JSON spells it.
void add_set_option(CLI::App& cmd, std::vector<std::string>& set);
// The --set pairs as a settings JSON object: a VALUE that parses as JSON (true, 2, "p2p", ["core_attn", "mlp"]) is
// that value, any other a string. A pair without '=' is an error naming it.
io::Json settings_of_set(const std::vector<std::string>& set, const std::string& option = "--set");

// A training setting swept as a dimension (--vary KEY=V1,V2,...): its key and values, each as --set spells it.
struct VariedSetting {
  std::string key;
  std::vector<std::string> values;
};
// The --vary options as dimensions, in the order their keys are first given (a key given again adds its values, a
// value given twice is one; values split at commas outside JSON brackets and quotes). Each value is checked alone
// (the key known, the value of its type and range); how it sits with the other settings is checked per combination
// (resolve_varied_settings). A key `set` fixes, or one `elsewhere` names (key, its own option), is an error.
std::vector<VariedSetting> varied_settings(const std::vector<std::string>& vary, const std::vector<std::string>& set,
                                           const std::vector<std::pair<std::string, std::string>>& elsewhere);
// Every combination of the dimensions' values, each as KEY=VALUE pairs in the dimensions' order; one empty
// combination when there are none.
std::vector<std::vector<std::string>> combinations(const std::vector<VariedSetting>& dims);

// What a θ file says of the runs it was fitted on: their models, and its error in-sample and on held-out runs
// (the calibration's cross-validation). A model outside `models` is an extrapolation, which the intervals (scaled
// by the in-sample residuals) do not cover.
struct ThetaFit {
  std::vector<std::string> models;          // model presets of the fitted runs
  std::vector<std::string> configurations;  // the fitted runs, "<model or model setting>:<configuration>"
  std::vector<Model> model_specs;           // their architectures (`provenance.models`; absent in older θ files)
  bool includes_model = false;              // the predicted model is one of them, by name or architecture
  std::string fitted_as;                    // the fitted model it shares its architecture with, if named otherwise
  double in_sample_time_mape_pct = std::nan("");
  std::string held_out_kind;  // the cross-validation: loo, leave-one-model-out, ...
  double held_out_time_mape_pct = std::nan("");
  // The fitted runs' range per dimension of kRangeDims (`provenance.fitted_range`; absent in older θ files).
  eval::FittedRange range;
};
using calib::kRangeDims;
// `provenance.fitted_range` of the runs `idx` of `pb`: {name: [min, max]} per dimension.
io::Json fitted_range_json(const calib::Problem& pb, const std::vector<std::size_t>& idx);
// The values (name, value) outside a fitted range, as "seq_length 131072 (fitted 2048-8192)".
std::vector<std::string> outside_fitted_range(const eval::FittedRange& range,
                                              const std::vector<std::pair<std::string, double>>& values);
// The same over many runs, one entry per dimension with the span of the runs beyond the range
// ("seq_length 16384-1048576 (fitted 2048-8192)").
std::vector<std::string> outside_fitted_range(const eval::FittedRange& range,
                                              const std::vector<std::vector<std::pair<std::string, double>>>& runs);
std::vector<std::pair<std::string, double>> range_values(const Model& m, const Strategy& s, const TrainingSettings& t);
// What a warning about a prediction beyond θ's fitted range says of its intervals: how much they widen per e-fold
// (θ's measured extrapolation scale), or that they do not.
std::string widening_said(const std::optional<calib::Uncertainty>& u);
// Why flash attention on a device without a fused-attention kernel (System::fused_attention false) models
// another kernel, said after the system's name wherever a run asks for it there.
std::string no_fused_attention(const System& s);
struct Resolved {
  Model model;
  System system;
  TrainingSettings settings;
  PlatformParams params;
  std::string params_source;  // which θ: a --params file, the system's shipped fitted θ, or uncalibrated defaults
  std::string params_file;    // the θ file read (empty: uncalibrated preset defaults)
  // θ's covariance when the θ file carries one; the priors' (calib::prior_uncertainty) for uncalibrated defaults
  std::optional<calib::Uncertainty> uncertainty;
  std::optional<ThetaFit> fit;  // when the θ file records its fitted runs
  bool held_out_scale = false;  // the model is outside the fitted runs: the intervals take θ's held-out-model scale
};
// The fitted-runs record of θ file `file` for a prediction of `model` (none: no prediction), nullopt when the file
// has none. A malformed `provenance.models` entry is an io::InputError naming the file and the entry.
std::optional<ThetaFit> theta_fit(const io::Json& theta, const std::string& file, const Model* model);
// The `uncertainty` object of a θ file (written by lmsim calibrate), when present.
std::optional<calib::Uncertainty> load_uncertainty(const io::Json& theta, const std::string& theta_file);
io::Json uncertainty_json(const calib::Uncertainty& u);
// The training settings of stack `stack` on `sys` (its FP8 recipe runs BF16 on a device without FP8 units, said);
// with no stack, lmsim's defaults with what `sys` lacks (BF16, a fused-attention kernel) turned off.
TrainingSettings stack_settings_on(const std::string& stack, const System& sys);
// `t` with a --settings file and then --set pairs over it; flash attention asked of a device without a fused
// kernel is warned of.
TrainingSettings with_settings_options(TrainingSettings t, const std::string& settings_file,
                                       const std::vector<std::string>& set, const System& sys);
// A θ file records the training settings it was fitted under (`provenance.training_settings`); a prediction under
// others is warned of, naming each that differs.
void warn_if_other_stack(const io::Json& theta, const std::string& theta_file, const TrainingSettings& now);
// θ's fitted stacks (`provenance.stacks`) against a prediction's settings: lmsim's generic defaults are told which
// --stack predicts as the fitted runs ran; another stack, that its differences rest on modelled effects (info).
void say_fitted_stacks(const io::Json& theta, const std::string& theta_label, const std::string& stack,
                       bool settings_given, const TrainingSettings& t);
// The training settings `o` asks for on `sys`: its stack, settings file and --set pairs, then its sizes; checked as a
// prediction's (validate, and a precision the system has units for).
TrainingSettings resolve_settings(const RunOptions& o, const System& sys);
// Under a table whose rows run in different precisions: their MFU is against each one's own peak (FP8 rows against
// the FP8 peak), so their times, not their MFU, compare them. Empty when every row runs in one precision.
std::string mfu_precision_note(const std::vector<Precision>& rows);
// resolve_settings with one --vary combination (KEY=VALUE pairs) over `o`'s --set pairs; an error names --vary, the
// system and the combination.
TrainingSettings resolve_varied_settings(const RunOptions& o, const std::vector<std::string>& combo, const System& sys);
Resolved resolve(const RunOptions& o);
// io::read_dataset, warning of every collection whose recorded settings its measured peaks contradict.
io::Dataset read_dataset_warned(const std::string& root);

// A command-line number that must be finite (CLI11's ranges let NaN through: NaN compares false).
const CLI::Validator& finite_number();
// A command-line size: a positive integer.
const CLI::Validator& positive_size();

// Prints rows as an aligned text table.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
std::string fmt(double v, int prec = 3);
// A whole number with thousands separators: 5380279 -> "5,380,279" (from 1e21 on, and not finite: "%.4g").
std::string grouped(double v);
// --train-tokens' ceiling: a million times the largest published pre-training run (~1e13 tokens), far past any plan.
constexpr double kMaxTrainTokens = 1e18;
// The items of a list or set of strings, comma-separated.
template <class Strings>
std::string join(const Strings& items) {
  std::string out;
  for (const auto& x : items) out += (out.empty() ? "" : ", ") + std::string(x);
  return out;
}
std::string gib(double bytes);

#define LMSIM_VERSION_STRING LMSIM_VERSION

void register_models(CLI::App& app);
void register_dataset(CLI::App& app);
void register_predict(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_search(CLI::App& app);
void register_evaluate(CLI::App& app);
void register_export(CLI::App& app);
void register_plot(CLI::App& app);

// The command line being run (set by apps/cli.cpp), for provenance.
void set_command_line(const std::vector<std::string>& args);
const std::string& command_line();
// Provenance attributes of an HDF5 output on `object`: command_line, lmsim_version, lmsim_commit, data_dir,
// created_utc and theta_files_json ([{path, sha256}] of the θ files used).
void write_provenance(io::H5Writer& w, const std::string& object, const std::vector<std::string>& theta_files);
// The same as JSON (for θ files and --json documents).
io::Json provenance_json(const std::vector<std::string>& theta_files);

io::Json report_json(const calib::Report& r);
std::string report_line(const std::string& label, const calib::Report& r);

}  // namespace lmsim::app
