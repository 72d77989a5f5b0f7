// defines: sf::CpuBackend — the reference implementation of sf::Backend. "Device" memory is host
// memory, copies are memcpy, and each stream is a thread that runs its queue in order, so the
// engine's overlap (prefetch, offload, async update) really runs concurrently and is tested in CI.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace sf {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace sf
