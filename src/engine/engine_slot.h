// defines: sf::Engine::UnitEvents, sf::Engine::Slot, sf::Engine::OuterPart — where a unit's
// weights and gradients live on the device and the events that order their use (engine.cpp and
// engine_setup.cpp).
#pragma once

#include "engine/engine.h"

namespace sf {

// loaded: the weights are on the device; params_free: compute is done reading them (a load may
// overwrite them); grads_ready: the gradient's D2H source is complete; stage_free: the D2H has
// read it (the source may be written again). Data parallel: grads_done, the fp32 gradient is
// complete (compute); grads_read, its reduction (and conversion) has read it (reduce stream).
struct Engine::UnitEvents {
  std::unique_ptr<Event> loaded, params_free, grads_ready, stage_free, grads_done, grads_read;
  void create(Backend& be) {
    for (auto* e : {&loaded, &params_free, &grads_ready, &stage_free, &grads_done, &grads_read})
      *e = be.create_event();
  }
};

struct Engine::Slot : UnitEvents {
  DeviceParts::Slot mem;
  int layer = -1;
  int64_t version = -1;  // how many optimizer updates the weights it holds carry
  LayerParams p, g;
};

struct Engine::OuterPart : UnitEvents {
  int unit = 0;
  int64_t offset = 0, numel = 0;  // elements of the outer weights buffer
  int64_t grad_offset = 0;        // of the outer gradient and stage buffers (shared untied)
  int64_t version = -1;
};

}  // namespace sf
