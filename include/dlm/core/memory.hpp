// dlm/core/memory.hpp — how much memory the machine has and the process holds: so that a model,
// a KV cache or a batch's buffers that cannot fit are refused with the numbers, before the
// allocation that would bring in the OOM killer (the CPU models, and the engine's own states and
// logits: engine/prepare.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "error.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if __has_include(<sys/resource.h>)
#include <sys/resource.h>
#define DLM_HAVE_RUSAGE 1
#endif

namespace dlm {

/// Where memory is short: the host's memory, or an accelerator's (a CUDA device's free memory).
enum class memory_kind { host, device };

/// A model (or a buffer) needs more memory than the machine (`where`: the host, or the device) has
/// available: says how many bytes, for what, and how many are available.
class memory_error : public error {
public:
    memory_error(const std::string& what_for, std::uint64_t needed, std::uint64_t available, const std::string& hint,
                 memory_kind where = memory_kind::host)
        : error("not enough memory for " + what_for + ": " + std::to_string(needed) + " bytes (" + gib(needed) + ") needed, " +
                std::to_string(available) + " bytes (" + gib(available) + ") available" + (hint.empty() ? std::string() : "; " + hint)),
          needed_(needed), available_(available), where_(where) {}
    [[nodiscard]] std::uint64_t needed() const noexcept { return needed_; }
    [[nodiscard]] std::uint64_t available() const noexcept { return available_; }
    /// The bytes missing: needed less available.
    [[nodiscard]] std::uint64_t short_by() const noexcept { return needed_ > available_ ? needed_ - available_ : 0; }
    [[nodiscard]] memory_kind where() const noexcept { return where_; }

    /// "12.3 GiB"
    [[nodiscard]] static std::string gib(std::uint64_t bytes) {
        std::ostringstream s;
        s.precision(3);
        s << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
        return s.str();
    }

private:
    std::uint64_t needed_, available_;
    memory_kind where_;
};

namespace detail {
/// a·b and a + b, or the largest 64-bit number when they would pass it (byte counts of shapes too
/// large to hold are refused by the memory check, never wrapped around to a small one).
[[nodiscard]] constexpr std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
    return a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a ? std::numeric_limits<std::uint64_t>::max() : a * b;
}
[[nodiscard]] constexpr std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
    return b > std::numeric_limits<std::uint64_t>::max() - a ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

/// The first number in `path` (a cgroup file), or max for "max" or an unreadable file.
inline std::uint64_t read_limit(const char* path) {
    std::ifstream in(path);
    std::string word;
    if (!(in >> word) || word == "max") return std::numeric_limits<std::uint64_t>::max();
    try {
        return std::stoull(word);
    } catch (...) {
        return std::numeric_limits<std::uint64_t>::max();
    }
}
/// A "Key: N kB" line of a /proc file, in bytes; 0 if absent.
inline std::uint64_t proc_kib(const char* path, const std::string& key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (line.compare(0, key.size(), key) == 0 && line.size() > key.size() && line[key.size()] == ':') {
            try {
                return std::stoull(line.substr(key.size() + 1)) * 1024;
            } catch (...) {
                return 0;
            }
        }
    return 0;
}
/// The number after `key` on a "key N" line of a cgroup's memory.stat; 0 if absent.
inline std::uint64_t stat_value(const char* path, const std::string& key) {
    std::ifstream in(path);
    std::string name;
    std::uint64_t value = 0;
    while (in >> name >> value)
        if (name == key) return value;
    return 0;
}
/// A cgroup's usage less the page cache it may drop (inactive files: a model file just read or
/// mapped), the "working set" container tools report; max() when the usage cannot be read.
inline std::uint64_t cgroup_working_set(const char* usage, const char* stat, const char* inactive_key) {
    const std::uint64_t used = read_limit(usage);
    if (used == std::numeric_limits<std::uint64_t>::max()) return used;
    const std::uint64_t inactive = stat_value(stat, inactive_key);
    return used > inactive ? used - inactive : 0;
}
}  // namespace detail

/// Bytes this process can still allocate without swapping: MemAvailable (free memory plus the page
/// cache the kernel can drop), lowered to the room left under a cgroup (v2 or v1) memory limit, its
/// usage counted without the file cache it may drop, and under the process's address-space limit
/// (RLIMIT_AS). max() where none can be read.
[[nodiscard]] inline std::uint64_t available_memory() {
    std::uint64_t avail = detail::proc_kib("/proc/meminfo", "MemAvailable");
    if (avail == 0) avail = std::numeric_limits<std::uint64_t>::max();
#if defined(DLM_HAVE_RUSAGE)
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
        const std::uint64_t mapped = detail::proc_kib("/proc/self/status", "VmSize");
        const auto limit = static_cast<std::uint64_t>(as.rlim_cur);
        avail = std::min(avail, limit > mapped ? limit - mapped : 0);
    }
#endif
    const std::uint64_t v2_max = detail::read_limit("/sys/fs/cgroup/memory.max");
    if (v2_max != std::numeric_limits<std::uint64_t>::max()) {
        const std::uint64_t used = detail::cgroup_working_set("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file");
        if (used != std::numeric_limits<std::uint64_t>::max()) avail = std::min(avail, v2_max > used ? v2_max - used : 0);
    }
    const std::uint64_t v1_max = detail::read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    if (v1_max < (std::uint64_t{1} << 60)) {
        const std::uint64_t used =
            detail::cgroup_working_set("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file");
        if (used != std::numeric_limits<std::uint64_t>::max()) avail = std::min(avail, v1_max > used ? v1_max - used : 0);
    }
    return avail;
}

/// The process's resident memory now (VmRSS), in bytes; 0 where unknown.
[[nodiscard]] inline std::uint64_t resident_memory() { return detail::proc_kib("/proc/self/status", "VmRSS"); }

/// The process's peak resident memory so far (VmHWM, else getrusage), in bytes; 0 where unknown.
[[nodiscard]] inline std::uint64_t peak_resident_memory() {
    if (const std::uint64_t hwm = detail::proc_kib("/proc/self/status", "VmHWM"); hwm != 0) return hwm;
#if defined(DLM_HAVE_RUSAGE)
    rusage u{};
    if (getrusage(RUSAGE_SELF, &u) == 0) return static_cast<std::uint64_t>(u.ru_maxrss) * 1024;
#endif
    return 0;
}

/// Hands the heap's free pages back to the system (glibc's malloc_trim), so that memory just freed
/// (evicted prompt-cache blocks: engine.hpp) counts in available_memory() at once; elsewhere nothing.
inline void return_freed_memory() noexcept {
#if defined(__GLIBC__)
    (void)malloc_trim(0);
#endif
}

/// Buffers of at most this many bytes are allocated without weighing them alone: reading /proc for
/// each costs more than it saves. A batch's small buffers are weighed summed (engine/prepare.hpp).
inline constexpr std::uint64_t weighed_above = std::uint64_t{64} << 20;

/// Throws memory_error unless `needed` bytes (for `what_for`) fit in available_memory().
inline void check_fits(const std::string& what_for, std::uint64_t needed, const std::string& hint = {}) {
    const std::uint64_t avail = available_memory();
    if (needed > avail) throw memory_error(what_for, needed, avail, hint);
}

}  // namespace dlm
