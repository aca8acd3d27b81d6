#include "simulator/system.hpp"

#include <cmath>

namespace lmsim {

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
  }
  return "?";
}

std::string validate(const System& s) {
  auto bad = [](double v) { return !std::isfinite(v) || v <= 0; };
  if (s.devices_per_node <= 0 || s.devices_per_node > 1024) return "devices_per_node must be in [1, 1024]";
  if (bad(s.peak_flops_fp16) && bad(s.peak_flops_bf16)) return "peak FLOP/s must be positive";
  if (!std::isfinite(s.peak_flops_fp8) || s.peak_flops_fp8 < 0) return "peak_tflops.fp8 must not be negative";
  if (bad(s.hbm_capacity_bytes)) return "hbm_capacity must be positive";
  if (bad(s.hbm_bandwidth_bytes_per_s)) return "hbm_bandwidth must be positive";
  if (bad(s.intra_node.bandwidth_bytes_per_s)) return "intra_node bandwidth must be positive";
  if (bad(s.inter_node.bandwidth_bytes_per_s)) return "inter_node bandwidth must be positive";
  if (!std::isfinite(s.intra_node.latency_s) || s.intra_node.latency_s < 0)
    return "intra_node latency must not be negative";
  if (!std::isfinite(s.inter_node.latency_s) || s.inter_node.latency_s < 0)
    return "inter_node latency must not be negative";
  return {};
}

}  // namespace lmsim
