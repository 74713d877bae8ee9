#!/usr/bin/env bash
# Installs what building and testing dlm needs, on Debian 12 (bookworm) or a derivative:
#   cmake (>= 3.25, for CMakePresets.json v6), g++ (C++20), make, doctest-dev,
#   nlohmann-json3-dev, and for the fuzz targets (tests/fuzz/) clang with its libFuzzer runtime
#   (libclang-rt-14-dev: bookworm's clang is 14, and --no-install-recommends leaves the runtime out),
#   libomp-14-dev (clang's OpenMP: the asan preset builds with clang++, CMakePresets.json),
#   and for dlm-server's client tests (docs/server.md) curl and python3-venv (the openai package goes
#   into a venv made by scripts/setup-openai-venv.sh, never into the system Python). dlm-server's HTTP
#   layer is its own (server/http_*.hpp, POSIX sockets), so it needs no HTTP library.
#   Its scale-out tests put two routers from Debian in front of several replicas: haproxy and nginx-light
#   (tests/server/scaleout_test.py).
#   dlm's Python package (docs/python.md) builds against python3-dev's headers; nanobind and scikit-build-core
#   come from PyPI into a venv (tests/python/install_package.sh).
#   ccache: dlm's builds compile through it when it is there (CMakeLists.txt, DLM_CCACHE), so the Python
#   wheel's build reuses the kernels' object the test build compiled.
# GCC's OpenMP (omp.h, libgomp) comes with g++; clang's is libomp-14-dev.
# Idempotent: installs only what is missing and runs `apt-get update` only when apt cannot find a
# missing package without it. Runs as root, or through sudo otherwise.
set -euo pipefail

packages=(cmake g++ make ccache doctest-dev nlohmann-json3-dev clang libclang-rt-14-dev libomp-14-dev curl python3-venv python3-dev haproxy nginx-light)
min_cmake=3.25

die() {
    echo "install-deps.sh: error: $*" >&2
    exit 1
}

command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
    die "this script needs apt-get (Debian 12 or a derivative); elsewhere install by hand: ${packages[*]} (cmake >= ${min_cmake})"

is_installed() { [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" == installed ]]; }
# apt knows an installable version of the package (it may need `apt-get update` first).
has_candidate() {
    local c
    c=$(apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [[ -n "$c" && "$c" != "(none)" ]]
}

missing=()
for p in "${packages[@]}"; do
    is_installed "$p" || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
    if ((EUID == 0)); then
        as_root=()
    elif command -v sudo >/dev/null; then
        as_root=(sudo)
    else
        die "missing ${missing[*]}, and installing them needs root: run this script as root, or install sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT

    for p in "${missing[@]}"; do
        if ! has_candidate "$p"; then
            echo "install-deps.sh: apt-get update"
            "${as_root[@]}" apt-get update -qq >"$log" 2>&1 ||
                { cat "$log" >&2; die "apt-get update failed (see above)"; }
            break
        fi
    done
    for p in "${missing[@]}"; do
        has_candidate "$p" || die "apt has no package '$p' (this script targets Debian 12 'bookworm'; check /etc/apt/sources.list)"
    done

    echo "install-deps.sh: installing ${missing[*]}"
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1 ||
        { cat "$log" >&2; die "apt-get install ${missing[*]} failed (see above)"; }
fi

# The packages are there; check that what they provide works.
version=$(cmake --version 2>/dev/null | sed -n '1s/^cmake version \([0-9][0-9.]*\).*/\1/p')
[[ -n "$version" ]] || die "cmake is installed but 'cmake --version' does not run"
[[ "$(printf '%s\n' "$min_cmake" "$version" | sort -V | head -n1)" == "$min_cmake" ]] ||
    die "cmake ${version} is too old: dlm's presets need cmake >= ${min_cmake} (Debian 12 ships 3.25)"
echo 'int main() { return 0; }' | g++ -std=c++20 -fopenmp -x c++ - -o /dev/null 2>/dev/null ||
    die "g++ cannot compile C++20 with -fopenmp (is g++ >= 10 installed?)"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    clang++ -std=c++20 -fsanitize=fuzzer,address,undefined -x c++ - -o /dev/null 2>/dev/null ||
    die "clang++ cannot link -fsanitize=fuzzer,address,undefined (the fuzz targets need libclang-rt-14-dev)"
echo 'int main() { return 0; }' | clang++ -std=c++20 -fopenmp -fsanitize=address,undefined -x c++ - -o /dev/null 2>/dev/null ||
    die "clang++ cannot compile with -fopenmp and the sanitizers (the asan preset needs libomp-14-dev)"

echo "install-deps.sh: all dependencies present (cmake ${version}, $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /')," \
    "$(clang++ -dumpversion 2>/dev/null | sed 's/^/clang++ /'))"
