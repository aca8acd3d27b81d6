#include "apps/common.hpp"
namespace lmsim::app {
void register_search(CLI::App&) {}
}  // namespace lmsim::app
