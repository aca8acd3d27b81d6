// The Python module `lmsim`: `lmsim.predict(**kw)`, `lmsim.search(**kw)`, `lmsim.calibrate(**kw)`,
// `lmsim.evaluate(**kw)` and `lmsim.shortlist(**kw)` take the CLI's options as keyword arguments (dashes become
// underscores: global_batch=64 is --global-batch 64; True is a flag; lists are comma-joined, but set=[...] repeats
// --set) and return the same document as the command's `--json`, as a dict; predict's per-rank peak memory is a numpy
// array. The commands run in-process through apps/cli.hpp, the CLI's own code path. Bad input raises ValueError with
// the CLI's message.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "apps/cli.hpp"
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
    else if (key == "set" && (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)))
      for (const auto& item : v) q.run.set_settings.push_back(as_string(item));
    else if (key == "set")
      q.run.set_settings.push_back(as_string(v));
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

// kwargs -> the command's argv (with --json): the CLI parses and validates them exactly as on the command line.
std::vector<std::string> argv_of(const std::string& command, const py::kwargs& kw) {
  std::vector<std::string> args{"lmsim", command};
  for (const auto& [k, v] : kw) {
    std::string flag = "--" + k.cast<std::string>();
    for (auto& ch : flag)
      if (ch == '_') ch = '-';
    const bool listed = py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v);
    if (py::isinstance<py::bool_>(v)) {
      if (v.cast<bool>()) args.push_back(flag);
    } else if (listed && flag == "--set") {  // values may hold commas (JSON lists): one --set each
      for (const auto& item : v) {
        args.push_back(flag);
        args.push_back(as_string(item));
      }
    } else if (listed) {
      std::string joined;
      for (const auto& item : v) {
        if (!joined.empty()) joined += ',';
        joined += as_string(item);
      }
      args.push_back(flag);
      args.push_back(joined);
    } else if (!v.is_none()) {
      args.push_back(flag);
      args.push_back(as_string(v));
    }
  }
  args.push_back("--json");
  return args;
}

py::object run_command(const std::string& command, const py::kwargs& kw) {
  if (command == "search") {  // a one-rank MPI job inside the interpreter (Open MPI's singleton start)
    int started = 0;
    MPI_Initialized(&started);
    if (!started) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    }
  }
  const app::CliOutcome r = app::run_cli_captured(argv_of(command, kw));
  if (r.code != 0) {
    std::string msg = r.message;
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    throw py::value_error(msg.empty() ? "lmsim " + command + " failed" : msg);
  }
  return py::module_::import("json").attr("loads")(r.out);
}

}  // namespace

PYBIND11_MODULE(lmsim, m) {
  m.doc() = "lmsim: calibrated simulation of LLM training parallel strategies";
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmsim"));
  spdlog::set_level(spdlog::level::warn);  // the CLI's info lines stay out of notebooks
  m.def("predict", &predict_py,
        "predict(model=, system=, strategy=, devices=, seq=, global_batch=, micro_batch=, params=, settings=, "
        "stack=, set=, allow_uneven_layers=, allow_cross_node_tp=, emit=) -> dict, as `lmsim predict --json` "
        "(set: 'KEY=VALUE' or a list of them, as --set)");
  for (const char* c : {"search", "calibrate", "evaluate", "shortlist", "models", "systems", "stacks"}) {
    const std::string name = c;
    m.def(
        c, [c](const py::kwargs& kw) { return run_command(c, kw); },
        ("lmsim." + name + "(**options) -> dict: `lmsim " + name +
         " --json` with the CLI's options as keywords (global_batch=64, devices=[8, 16], allow_uneven_layers=True)")
            .c_str());
  }
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    int started = 0, finished = 0;
    MPI_Initialized(&started);
    MPI_Finalized(&finished);
    if (started && !finished) MPI_Finalize();
  }));
  m.attr("__version__") = LMSIM_VERSION;
}
