// defines: sf::alloc_pinned — many pinned host buffers taken by several threads at once. Pinning
// is the slow part of a run's start (the kernel zeroes and locks every page: 52 s for the 106 GiB
// of an 8B model on one thread, H200 machine, 2026-12-03); separate buffers — one per unit, one
// per checkpoint — let threads pin in parallel, and keep every H2D/D2H copy inside one
// registration.
#pragma once

#include <functional>
#include <vector>

#include "backend/backend.h"

namespace sf {

// One buffer per size (0 gives an empty Buffer), in order. `ready(i, data)`, where given, runs
// on the thread that took buffer i right after it (not for empty ones), so work on the first
// buffers overlaps the pinning of the rest. The first failure, of an allocation or of `ready`,
// is rethrown after every thread has finished; no buffer is started after it.
std::vector<Buffer> alloc_pinned(Backend& backend, const std::vector<size_t>& sizes,
                                 const char* what,
                                 const std::function<void(size_t, void*)>& ready = {},
                                 int threads = 8);

}  // namespace sf
