// dlm/dlm.hpp — the umbrella header: the decoder, every shipped policy and the presets.
// The CPU model and loaders (dlm::cpu, dlm::io) have their own headers, since they need
// nlohmann_json.
#pragma once

#include "cache/caches.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"
#include "core/result.hpp"
#include "core/rng.hpp"
#include "decoder.hpp"
#include "mask/masks.hpp"
#include "model/concept.hpp"
#include "presets.hpp"
#include "sampler/samplers.hpp"
#include "schedule/cd4lm.hpp"
#include "schedule/dream.hpp"
#include "schedule/editing.hpp"
#include "schedule/llada.hpp"
#include "schedule/next_slot.hpp"
#include "schedule/threshold.hpp"
