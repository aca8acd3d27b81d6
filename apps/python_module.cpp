// The Python module `lmsim`: `lmsim.predict(**kw)`, `lmsim.search(**kw)`, `lmsim.calibrate(**kw)`,
// `lmsim.evaluate(**kw)` and `lmsim.shortlist(**kw)` take the CLI's options as keyword arguments (dashes become
// underscores: global_batch=64 is --global-batch 64; True is a flag; lists are comma-joined, but set=[...] repeats
// --set) and return the same document as the command's `--json`, as a dict; predict's per-rank peak memory is a numpy
// array (strategy=[...] compares several: {"predictions": [...]}, as the CLI's comma list). The commands run
// in-process through apps/cli.hpp, the CLI's own code path. Bad input raises ValueError with the CLI's message; a
// keyword that names no option of the command raises one naming it.
#include <mpi.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "apps/cli.hpp"

namespace py = pybind11;
using namespace lmsim;

namespace {

std::string as_string(const py::handle& v) { return py::str(v).cast<std::string>(); }

// A keyword's command-line option: global_batch -> --global-batch.
std::string flag_of(const py::handle& key) {
  std::string flag = "--" + key.cast<std::string>();
  for (auto& ch : flag)
    if (ch == '_') ch = '-';
  return flag;
}

// kwargs -> the command's argv (with --json): the CLI parses and validates them exactly as on the command line.
std::vector<std::string> argv_of(const std::string& command, const py::kwargs& kw) {
  std::vector<std::string> args{"lmsim", command};
  for (const auto& [k, v] : kw) {
    const std::string flag = flag_of(k);
    const bool listed = py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v);
    if (py::isinstance<py::bool_>(v)) {
      if (v.cast<bool>()) args.push_back(flag);
    } else if (listed && (flag == "--set" || flag == "--vary")) {  // values hold commas: one option each
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

// Every keyword must name an option of the command (or a global one): a misspelt keyword is named as such, not
// left to the command line's "arguments were not expected".
void check_keywords(const std::string& command, const py::kwargs& kw) {
  CLI::App app;
  std::string level;
  app::build_cli(app, level);
  const CLI::App* sub = app.get_subcommand(command);
  for (const auto& [k, v] : kw) {
    const std::string flag = flag_of(k);
    if (sub->get_option_no_throw(flag) == nullptr && app.get_option_no_throw(flag) == nullptr)
      throw py::value_error("lmsim." + command + ": unknown keyword '" + k.cast<std::string>() + "'");
  }
}

// predict's per-rank peak memory as a numpy array, in one prediction or in each of a comparison's.
void peaks_as_numpy(py::dict& d) {
  if (!d.contains("peak_memory_bytes")) return;
  const auto mem = d["peak_memory_bytes"].cast<std::vector<double>>();
  d["peak_memory_bytes"] = py::array_t<double>(static_cast<py::ssize_t>(mem.size()), mem.data());
}

py::object run_command(const std::string& command, const py::kwargs& kw) {
  check_keywords(command, kw);
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
  py::object doc = py::module_::import("json").attr("loads")(r.out);
  if (command == "predict") {
    py::dict d = doc.cast<py::dict>();
    peaks_as_numpy(d);
    if (d.contains("predictions"))
      for (auto p : d["predictions"]) {
        py::dict each = p.cast<py::dict>();
        peaks_as_numpy(each);
      }
  }
  return doc;
}

}  // namespace

PYBIND11_MODULE(lmsim, m) {
  m.doc() = "lmsim: calibrated simulation of LLM training parallel strategies";
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmsim"));
  spdlog::set_level(spdlog::level::warn);  // the CLI's info lines stay out of notebooks
  for (const char* c : {"predict", "search", "calibrate", "evaluate", "shortlist", "models", "systems", "stacks"}) {
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
