// libFuzzer target: JSON spec loading (model or HuggingFace config, system, training settings, θ) and, when a model and
// settings load, one simulation: errors are InputErrors, and a spec that loads never yields NaN or inf.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "io/error.hpp"
#include "io/specs.hpp"

using namespace lmsim;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  io::Json j;
  try {
    j = io::Json::parse(text);
  } catch (const io::Json::exception&) {
    return 0;
  }
  Model m;
  bool have_model = false;
  try {
    m = io::is_hf_config(j) ? io::model_from_hf_config(j, "fuzz.json") : io::model_from_json(j, "fuzz.json");
    have_model = true;
  } catch (const io::InputError&) {
  }
  try {
    (void)io::system_from_json(j, "fuzz.json");
  } catch (const io::InputError&) {
  }
  TrainingSettings t;
  try {
    t = io::settings_from_json(j, "fuzz.json");
  } catch (const io::InputError&) {
  }
  PlatformParams p;
  try {
    p = io::params_from_json(j, "fuzz.json");
  } catch (const io::InputError&) {
  }
  if (have_model) {
    const System& s = io::presets().find_system("h100_sxm_80g")->system;
    Strategy st;
    st.data_parallel = 8;
    const Prediction pr = simulate(m, st, s, t, p);
    if (pr.ok() && (!std::isfinite(pr.iteration_time_s) || !std::isfinite(pr.max_peak_memory_bytes))) std::abort();
  }
  return 0;
}
