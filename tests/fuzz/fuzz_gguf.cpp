// Fuzz target: the bytes of one .gguf file -> dlm::io::gguf_header::parse (magic, version, counts,
// keys, strings, arrays, alignment, tensor infos, data offsets), then, for an accepted file, the model
// config (io::gguf_model_config) and the tokenizer (io::gguf_tokenizer_json) its metadata describe.
//
// Accepted files must describe tensors whose bytes lie inside the data section, hold exactly
// rows x row bytes of their type and do not overlap; anything else must be a dlm::error.
#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "dlm/io/gguf.hpp"
#include "dlm/io/gguf_model.hpp"
#include "dlm/io/gguf_tokenizer.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using dlm_fuzz::fuzz_check;
    const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
    try {
        const dlm::io::gguf_header h = dlm::io::gguf_header::parse(file, "fuzz.gguf");
        const std::byte* section = file.data() + h.data_offset();
        const std::byte* end = file.data() + file.size();
        std::vector<std::pair<const std::byte*, const std::byte*>> extents;
        for (const auto& t : h.tensors()) {
            fuzz_check(t.bytes.data() == section + t.offset && t.bytes.data() + t.bytes.size() <= end, "a tensor's bytes lie outside the data section");
            fuzz_check(t.cols() % dlm::io::gguf_block_size(t.type) == 0, "a row is not whole blocks");
            fuzz_check(t.bytes.size() == static_cast<std::size_t>(t.rows()) * dlm::io::gguf_row_bytes(t.type, t.cols()),
                       "a tensor's byte count is not rows x row bytes");
            fuzz_check(t.offset % h.alignment() == 0, "an accepted offset is not aligned");
            extents.emplace_back(t.bytes.data(), t.bytes.data() + t.bytes.size());
        }
        std::sort(extents.begin(), extents.end());
        for (std::size_t i = 1; i < extents.size(); ++i) fuzz_check(extents[i - 1].second <= extents[i].first, "accepted tensors overlap");
        try {
            const dlm::io::model_config c = dlm::io::gguf_model_config(h);
            fuzz_check(c.vocab_size > 0 && c.mask_id >= 0 && c.mask_id < c.vocab_size, "an accepted config has a bad mask id");
        } catch (const dlm::error&) {
        }
        (void)dlm::io::gguf_tokenizer(h);
    } catch (const dlm::error&) {
    }
    return 0;
}
