// The Python module `lmsim`: `lmsim.predict(**kw)` takes the CLI's options as keyword arguments (dashes become
// underscores) and returns the same document as `lmsim predict --json`, as a dict, with the per-rank peak memory as
// a numpy array. Bad input raises ValueError with the CLI's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <spdlog/spdlog.h>

#include <string>

#include "apps/predict_report.hpp"

namespace py = pybind11;
using namespace lmsim;

namespace {

std::string as_string(const py::handle& v) { return py::str(v).cast<std::string>(); }

py::dict predict_py(const py::kwargs& kw) {
  app::PredictRequest q;
  for (const auto& [k, v] : kw) {
    const std::string key = k.cast<std::string>();
    if (key == "model")
      q.run.model = as_string(v);
    else if (key == "system")
      q.run.system = as_string(v);
    else if (key == "strategy")
      q.strategy = as_string(v);
    else if (key == "devices")
      q.run.devices = v.cast<int>();
    else if (key == "seq")
      q.run.seq = v.cast<std::int64_t>();
    else if (key == "global_batch")
      q.run.global_batch = v.cast<std::int64_t>();
    else if (key == "micro_batch")
      q.run.micro_batch = v.cast<std::int64_t>();
    else if (key == "params")
      q.run.params_file = as_string(v);
    else if (key == "settings")
      q.run.settings_file = as_string(v);
    else if (key == "stack")
      q.run.platform_stack = as_string(v);
    else if (key == "allow_uneven_layers")
      q.allow_uneven = v.cast<bool>();
    else if (key == "allow_cross_node_tp")
      q.allow_cross_node = v.cast<bool>();
    else if (key == "emit")
      q.emit = as_string(v);
    else
      throw py::value_error("lmsim.predict: unknown keyword '" + key + "'");
  }
  if (q.run.model.empty() || q.run.system.empty() || q.strategy.empty())
    throw py::value_error("lmsim.predict needs model=, system= and strategy=");
  if (!q.run.platform_stack.empty() && q.run.platform_stack != "gpu" && q.run.platform_stack != "npu")
    throw py::value_error("stack must be gpu or npu");
  io::Json j;
  try {
    j = app::predict(q).json();
  } catch (const io::InputError& e) {
    throw py::value_error(e.what());
  }
  py::dict d = py::module_::import("json").attr("loads")(j.dump());
  const auto mem = j["peak_memory_bytes"].get<std::vector<double>>();
  d["peak_memory_bytes"] = py::array_t<double>(static_cast<py::ssize_t>(mem.size()), mem.data());
  return d;
}

}  // namespace

PYBIND11_MODULE(lmsim, m) {
  m.doc() = "lmsim: calibrated simulation of LLM training parallel strategies";
  spdlog::set_level(spdlog::level::warn);  // the CLI's info lines stay out of notebooks
  m.def("predict", &predict_py,
        "predict(model=, system=, strategy=, devices=, seq=, global_batch=, micro_batch=, params=, settings=, "
        "stack=, allow_uneven_layers=, allow_cross_node_tp=, emit=) -> dict, as `lmsim predict --json`");
  m.attr("__version__") = LMSIM_VERSION;
}
