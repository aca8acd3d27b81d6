// lmsim/io/published.hpp — published training measurements (papers, framework performance tables) as a
// collection type.
//
// Owns: reading the published-figure CSVs (one row per figure: architecture, layout, metric, value) together with
// `readings.csv`, which says per configuration which row is used, on which system preset and model, under which
// assumed training settings (recompute, SP, micro-batch, interleaving, overlap flags where the table does not
// say), or why it is dropped. Turns each used row into a run: model, strategy, settings and the iteration time the
// published figure implies (tokens/s per GPU: gbs·seq / (value·gpus); Narayanan et al. 2021 achieved TFLOP/s: their
// Eq. 3 FLOPs / (value·gpus); NeMo model TFLOP/s: NeMo's full-attention model FLOPs / (value·gpus)). Every field
// is checked; errors name file, line and field.
#pragma once

#include <string>
#include <vector>

#include "simulator/simulator.hpp"

namespace lmsim::io {

struct PublishedRun {
  std::string file;    // data file, relative to the folder
  long line = 0;       // its line
  std::string source;  // short source tag: the data file's stem (narayanan2021_table1_a100, ...)
  std::string label;   // "<model> <gpus>x<system>"
  std::string system;  // system preset
  Model model;
  Strategy strategy;
  TrainingSettings settings;
  double time_s = 0;
  std::string derivation;  // how time_s follows from the published figure
  std::string note;        // the reading's assumptions
  // The stack of the reading: the one it names as its settings' base, else the stack that describes its file
  // (presets/stacks.json `describes`), else empty.
  std::string stack;
  bool fit = true;  // false: a validation row (readings `use` = validate), predicted but never fitted
};

struct PublishedDrop {
  std::string file;
  long line = 0;
  std::string label, why;
};

struct PublishedSet {
  std::string root;
  std::vector<PublishedRun> runs;
  std::vector<PublishedDrop> dropped;
};

// Model FLOPs per token as NeMo's performance pages count them (attention full, not causal), at sequence `seq`.
double nemo_model_flops_per_token(const Model& m, double seq);

// Reads `<dir>/readings.csv` and the data files it names.
PublishedSet read_published(const std::string& dir);

}  // namespace lmsim::io
