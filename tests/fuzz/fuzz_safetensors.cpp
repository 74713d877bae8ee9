// Fuzz target: the bytes of one .safetensors file -> dlm::io::parse_safetensors (the 8-byte length,
// the JSON header and the tensor table: dtypes, shapes, data_offsets, overlaps).
//
// Accepted files must describe tensors that lie inside the data area, hold exactly shape x dtype
// bytes and do not overlap; anything else must be a dlm::error.
#include <algorithm>
#include <span>
#include <vector>

#include "dlm/io/safetensors_header.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using dlm_fuzz::fuzz_check;
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    std::vector<dlm::io::tensor_info> tensors;
    try {
        tensors = dlm::io::parse_safetensors(file, "fuzz.safetensors");
    } catch (const dlm::error&) {
        return 0;
    }
    const std::byte* begin = file.data();
    const std::byte* end = file.data() + file.size();
    std::vector<std::pair<const std::byte*, const std::byte*>> extents;
    for (const auto& t : tensors) {
        fuzz_check(t.bytes.empty() || (t.bytes.data() >= begin + 8 && t.bytes.data() + t.bytes.size() <= end),
                   "a tensor's bytes lie outside the file");
        const auto count = dlm::io::element_count(t.shape);
        fuzz_check(count.has_value(), "an accepted shape has no element count");
        fuzz_check(static_cast<std::uint64_t>(*count) * dlm::io::dtype_size(t.type) == t.bytes.size(),
                   "a tensor's byte count is not shape x dtype size");
        if (!t.bytes.empty()) extents.emplace_back(t.bytes.data(), t.bytes.data() + t.bytes.size());
    }
    std::sort(extents.begin(), extents.end());
    for (std::size_t i = 1; i < extents.size(); ++i) fuzz_check(extents[i - 1].second <= extents[i].first, "accepted tensors overlap");
    return 0;
}
