// settings_reading_bench: how far a collection's memory settings (SP, flash attention, fused norms, gradient dtype,
// reused master copy) can be read off its measured peaks, as the dataset reader does for a collection without
// training_settings.json. Identifiability only: for every dense model setting of the full dataset on the 910B3, five
// settings drawn at random, the layouts of its device count that fit in 64 GiB under them (4 to 12, redrawn
// otherwise) as the runs that ran, and peaks made by the simulator itself under the shipped θ, spread by 3 %
// (log-normal). The reader then sees the step
// times (so the feasibility evidence applies) and the peaks. Printed per collection: the memory MAPE of the
// settings read without the peaks (defaults, tp profile, feasibility) and with them, and the settings recovered.
//   settings_reading_bench [--seed N]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/io.hpp"

using namespace lmsim;
namespace fs = std::filesystem;

namespace {

double memory_mape_pct(const io::Collection& c) {
  const Model& m = io::presets().find_model(c.model)->model;
  const io::SystemPreset& sp = *io::presets().find_system(c.system);
  SimOptions so;
  so.validity = {c.devices, true, true, true};
  double sum = 0;
  int n = 0;
  for (const io::Run& r : c.runs) {
    if (!r.peak_memory_max_bytes) continue;
    const Prediction p = simulate(m, r.strategy, sp.system, c.settings, sp.params(), so);
    sum += std::fabs(p.max_peak_memory_bytes / *r.peak_memory_max_bytes - 1);
    ++n;
  }
  return n ? 100 * sum / n : std::nan("");
}

}  // namespace

int main(int argc, char** argv) {
  unsigned seed = 20261130;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = static_cast<unsigned>(std::stoul(argv[++i]));
  std::mt19937 rng(seed);
  const fs::path root = fs::temp_directory_path() / ("lmsim_settings_reading_" + std::to_string(::getpid()));
  const fs::path bare = root.string() + "_bare";  // the same runs without their peaks
  fs::remove_all(root);
  fs::remove_all(bare);
  const io::SystemPreset& sp = *io::presets().find_system("ascend_910b3_64g");
  const double cap = sp.system.hbm_capacity_bytes;
  // The bundled NPU stack's settings: the defaults a collection of the platform starts from.
  const TrainingSettings stack =
      io::read_dataset(io::data_dir() + "/lmsimbench").find("qwen3_0.6b_4k", "npu")->settings;
  std::vector<std::pair<std::string, std::vector<bool>>> truths;
  for (const io::ModelSetting& ms : io::model_settings(io::data_dir() + "/model_settings.csv")) {
    const Model& m = io::presets().find_model(ms.model)->model;
    if (m.is_moe()) continue;  // MoE names need their ep degree; the dense settings are what this reads
    TrainingSettings base = stack;
    base.seq_length = ms.seq_length;
    SimOptions so;
    so.validity = {ms.devices, true, true, true};
    std::vector<Strategy> layouts;
    for (int tp : {1, 2, 4, 8})
      for (int pp : {1, 2, 4, 8})
        for (int cp : {1, 2, 4}) {
          if (ms.devices % (tp * pp * cp)) continue;
          for (Recompute rc : {Recompute::none, Recompute::full}) {
            Strategy s;
            s.data_parallel = ms.devices / (tp * pp * cp);
            s.tensor_parallel = tp;
            s.pipeline_parallel = pp;
            s.context_parallel = cp;
            s.recompute = rc;
            if (check(m, s, base, so.validity) == Rejection::ok) layouts.push_back(s);
          }
        }
    // The runs that ran: the layouts that fit under the drawn settings (at least four, at most 12).
    std::shuffle(layouts.begin(), layouts.end(), rng);
    std::vector<bool> truth(std::size(io::kMemorySettings));
    std::vector<Strategy> ran;
    std::vector<double> peaks;
    bool fits = false;
    for (int attempt = 0; attempt < 60 && !fits; ++attempt) {
      TrainingSettings t = base;
      for (std::size_t k = 0; k < std::size(io::kMemorySettings); ++k)
        t.*io::kMemorySettings[k].member = truth[k] = rng() & 1;
      ran.clear();
      peaks.clear();
      for (const Strategy& s : layouts) {
        const Prediction p = simulate(m, s, sp.system, t, sp.params(), so);
        if (!p.ok() || p.max_peak_memory_bytes > 0.97 * cap) continue;
        ran.push_back(s);
        peaks.push_back(p.max_peak_memory_bytes * std::exp(std::normal_distribution<double>(0, 0.03)(rng)));
        if (ran.size() == 12) break;
      }
      fits = ran.size() >= 4;
    }
    if (!fits) continue;
    for (const fs::path& dir : {root / ms.id, bare / ms.id}) {
      fs::create_directories(dir);
      std::ofstream times(dir / "step_time_summary.csv");
      times << "optimization_config,iteration_time_ms\n";
      for (const Strategy& s : ran) times << config_name(s) << ",1000\n";
    }
    std::ofstream mem(root / ms.id / "peak_memory.csv");
    mem << "optimization_config,rank_id,peak_memory_mb\n";
    for (std::size_t i = 0; i < ran.size(); ++i) mem << config_name(ran[i]) << ",max," << peaks[i] / 1048576 << "\n";
    truths.push_back({ms.id, truth});
  }
  const io::Dataset read = io::read_dataset(root.string()), without = io::read_dataset(bare.string());
  std::printf("%-26s %4s  %22s  %18s  %s\n", "model setting", "runs", "memory MAPE w/o peaks", "read from peaks",
              "settings recovered");
  double sum_before = 0, sum_after = 0;
  int recovered = 0, total = 0, n = 0;
  for (const auto& [id, truth] : truths) {
    const io::Collection* c = read.find(id, "npu");
    io::Collection before = *c;  // the peaks with the settings read without them
    before.settings = without.find(id, "npu")->settings;
    int right = 0;
    for (std::size_t k = 0; k < std::size(io::kMemorySettings); ++k)
      right += c->settings.*io::kMemorySettings[k].member == truth[k];
    const double b = memory_mape_pct(before), a = memory_mape_pct(*c);
    std::printf("%-26s %4zu  %20.1f %%  %16.1f %%  %d / %zu\n", id.c_str(), c->runs.size(), b, a, right,
                std::size(io::kMemorySettings));
    sum_before += b;
    sum_after += a;
    recovered += right;
    total += static_cast<int>(std::size(io::kMemorySettings));
    ++n;
  }
  std::printf(
      "mean over %d collections: memory MAPE %.1f %% without the peaks' reading, %.1f %% with it; %d of %d "
      "settings recovered (the rest leave no mark beyond the 10 %% allowance)\n",
      n, sum_before / n, sum_after / n, recovered, total);
  fs::remove_all(root);
  fs::remove_all(bare);
  return 0;
}
