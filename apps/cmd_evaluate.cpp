#include "apps/common.hpp"
namespace lmsim::app {
void register_evaluate(CLI::App&) {}
}  // namespace lmsim::app
