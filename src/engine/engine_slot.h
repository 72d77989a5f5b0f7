// defines: sf::Engine::Slot — one cache slot of the engine (engine.cpp and engine_setup.cpp).
#pragma once

#include "engine/engine.h"

namespace sf {

struct Engine::Slot {
  DeviceParts::Slot mem;
  int layer = -1;
  int64_t version = -1;  // how many optimizer updates the weights it holds carry
  // loaded: the weights are on the device; params_free: compute is done reading them (a load may
  // overwrite them); grads_ready: the gradient's D2H source is complete; stage_free: the D2H has
  // read it (the source may be written again).
  std::unique_ptr<Event> loaded, params_free, grads_ready, stage_free;
  LayerParams p, g;
};


struct Engine::OuterPart {
  int unit = 0;
  int64_t offset = 0, numel = 0;  // elements of the outer weights buffer
  int64_t grad_offset = 0;        // of the outer gradient and stage buffers (shared untied)
  int64_t version = -1;
  std::unique_ptr<Event> loaded, params_free, grads_ready, stage_free;  // as a Slot's
};

}  // namespace sf
