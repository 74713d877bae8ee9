// dlm/cpu/memory.hpp — the memory queries of core/memory.hpp under the CPU backend's names (they
// moved to core so that the engine checks its own buffers too).
#pragma once

#include "../core/memory.hpp"

namespace dlm::cpu {

using dlm::available_memory;
using dlm::check_fits;
using dlm::peak_resident_memory;
using dlm::resident_memory;

}  // namespace dlm::cpu
