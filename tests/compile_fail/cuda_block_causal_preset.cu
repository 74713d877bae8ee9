// Must NOT compile: a preset whose schedule has no device step (sdar), mapped to the device decoder.
// The message names the missing hook; the preset runs on a GPU model with dlm::decoder instead.
#include <dlm/presets.hpp>

#include "cuda_model.cuh"

int main() {
    fake_device_model m;
    dlm::cuda::device_decoder_t<dlm::presets::sdar<fake_device_model>> d(m);
    (void)d;
    static_assert(!dlm::cuda::has_device_step<dlm::presets::sdar<fake_device_model>>);
}
