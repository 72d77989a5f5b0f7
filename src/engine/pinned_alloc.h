// defines: sf::alloc_pinned — many pinned host buffers taken by several threads at once. Pinning
// is the slow part of a run's start (the kernel zeroes and locks every page: 52 s for the 106 GiB
// of an 8B model on one thread, H200 machine, 2026-12-03); separate buffers — one per unit, one
// per checkpoint — let threads pin in parallel, and keep every H2D/D2H copy inside one
// registration.
#pragma once

#include <vector>

#include "backend/backend.h"

namespace sf {

// One buffer per size (0 gives an empty Buffer), in order; the first failure is rethrown after
// every thread has finished.
std::vector<Buffer> alloc_pinned(Backend& backend, const std::vector<size_t>& sizes,
                                 const char* what, int threads = 8);

}  // namespace sf
