// Predicts one strategy through the installed libraries and prints `lmsim predict --json`'s document.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "apps/predict_report.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: consumer MODEL SYSTEM DEVICES STRATEGY\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("consumer"));  // stdout carries the JSON document only
  lmsim::app::PredictRequest q;
  q.run.model = argv[1];
  q.run.system = argv[2];
  q.run.devices = std::stoi(argv[3]);
  q.strategy = argv[4];
  std::cout << lmsim::app::predict(q).json().dump(1) << "\n";
  return 0;
}
