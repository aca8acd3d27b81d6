#include "apps/common.hpp"
namespace lmsim::app {
void register_calibrate(CLI::App&) {}
}  // namespace lmsim::app
