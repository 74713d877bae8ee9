// Must NOT compile: a schedule without a device implementation, on the device decoder (it runs with
// dlm::decoder, which selects on the host).
#include "cuda_model.cuh"

struct my_schedule {
    void select(const dlm::step_context&, std::span<const dlm::candidate> c, std::vector<dlm::index_t>& chosen) const {
        if (!c.empty()) chosen.push_back(0);
    }
};

int main() {
    fake_device_model m;
    dlm::cuda::device_decoder<fake_device_model, dlm::block_causal_mask, dlm::prefix_cache, my_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
