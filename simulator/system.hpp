// lmsim/simulator/system.hpp — the system N of a simulation instance x = (M, P, N).
//
// Owns: a device type (peak dense FLOP/s per dtype, HBM capacity and bandwidth) and the links between devices
// inside and across nodes. How many devices a job uses is a property of the strategy, not of the system.
#pragma once

#include <string>

namespace lmsim {

enum class Precision { fp16, bf16, fp8 };
const char* to_string(Precision p);

struct Link {
  double bandwidth_bytes_per_s = 0;  // unidirectional, per device
  double latency_s = 0;
};

struct System {
  std::string name;
  std::string device;
  int devices_per_node = 8;
  double peak_flops_fp16 = 0;  // dense FLOP/s
  double peak_flops_bf16 = 0;
  double peak_flops_fp8 = 0;  // 0 when the device has no FP8 units
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth_bytes_per_s = 0;
  Link intra_node;
  Link inter_node;
  // Matrix units that need operands in their own tiled layout (Ascend's fractal NZ format): every GEMM's inputs
  // and output pass through a layout-conversion (TransData) kernel in HBM.
  bool gemm_layout_conversion = false;
  // NVLink SHARP (NVSwitch gen3+: H100/H200, B200, GB200): NCCL's NVLS all-reduce reduces in the switch, so each
  // GPU sends and receives its buffer once instead of a ring's 2(n-1)/n times.
  bool nvlink_sharp = false;

  double peak_flops(Precision p) const {
    switch (p) {
      case Precision::fp16: return peak_flops_fp16;
      case Precision::bf16: return peak_flops_bf16;
      case Precision::fp8: return peak_flops_fp8;
    }
    return 0;
  }
};

std::string validate(const System& s);

}  // namespace lmsim
