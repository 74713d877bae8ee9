#!/usr/bin/env bash
# Builds the llama.cpp that issue 23's comparisons time (bench/compare_llamacpp.sh LLAMA_BUILD_DIR,
# bench/cpu_targets.py --llama LLAMA_BUILD_DIR), outside dlm's sources: the copy of llama.cpp that PyPI's
# llama-cpp-python source archive vendors (0.3.36: llama.cpp 0c1e570, the one docs/benchmarks.md measured),
# fetched from PyPI's index with curl and checked against its sha256, built with clang in Release for this CPU
# (GGML_NATIVE), only the targets the comparisons run (llama-bench, llama-quantize). Nothing of it is part of
# dlm: it lands under build/ (ignored by git) unless --dest says elsewhere.
#   scripts/build-llamacpp.sh [--dest DIR] [--version V] [--jobs N] [--force]
# Where the CPU has AMX tiles (amx_int8 in /proc/cpuinfo), the build defines __AMX_INT8__, __AMX_TILE__
# and __AMX_BF16__ itself: clang 14 defines __AMXINT8__ where ggml tests __AMX_INT8__, so a native build
# would leave llama.cpp's AMX kernels out, and gcc 12 drops the stores that fill the tile configuration
# (docs/benchmarks.md, "Comparison harnesses: PyTorch and llama.cpp on the same files"). Idempotent: a
# build that has both programs is reused (--force builds again). The last line printed is the build
# directory.
# Needs curl, python3 (the standard library reads PyPI's JSON), cmake, clang (scripts/install-deps.sh).
set -euo pipefail
name=$(basename "$0")
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "$name: $*" >&2; exit 1; }
usage() { sed -n '8p' "$0" | sed 's/^# \{0,3\}//' >&2; exit 2; }

dest=$root/build/llama.cpp version=0.3.36 jobs=$(nproc) force=0
while (($#)); do
    case $1 in
        -h | --help) usage ;;
        --force) force=1; shift; continue ;;
        --dest | --version | --jobs) (($# >= 2)) || die "$1 needs a value" ;;
        *) die "unknown option '$1'" ;;
    esac
    case $1 in
        --dest) dest=$2 ;;
        --version) version=$2 ;;
        --jobs) jobs=$2 ;;
    esac
    shift 2
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a number >= 1, not '$jobs'"
[[ $version =~ ^[0-9]+(\.[0-9]+)*$ ]] || die "--version must be a release number such as 0.3.36, not '$version'"
for tool in curl python3 cmake clang clang++ tar sha256sum; do
    command -v "$tool" >/dev/null || die "no $tool (scripts/install-deps.sh installs what this needs)"
done

amx=0
grep -qw amx_int8 /proc/cpuinfo 2>/dev/null && amx=1
build=$dest/build-$( ((amx)) && echo amx || echo native)
if ((!force)) && [[ -x $build/bin/llama-bench && -x $build/bin/llama-quantize ]]; then
    echo "$name: reusing $build (--force builds it again)" >&2
    echo "$build"
    exit 0
fi
mkdir -p "$dest"

# The source archive: its address and sha256 from PyPI's simple index (its JSON form, PEP 691).
archive=$dest/llama_cpp_python-$version.tar.gz
src=$dest/src-$version
if [[ ! -d $src ]]; then
    index=$(curl -fsSL -H "Accept: application/vnd.pypi.simple.v1+json" "https://pypi.org/simple/llama-cpp-python/") ||
        die "cannot read PyPI's index of llama-cpp-python"
    read -r url sha < <(VERSION=$version python3 -c '
import json, os, sys
want = "llama_cpp_python-" + os.environ["VERSION"] + ".tar.gz"
found = [f for f in json.load(sys.stdin)["files"] if f["filename"] == want]
if not found: sys.exit(1)
print(found[0]["url"], found[0]["hashes"]["sha256"])' <<<"$index") || die "PyPI has no source archive of llama-cpp-python $version"
    if [[ ! -f $archive ]] || ! echo "$sha  $archive" | sha256sum -c --status; then
        echo "$name: downloading $url" >&2
        curl -fsSL -o "$archive.part" "$url" || die "cannot download $url"
        echo "$sha  $archive.part" | sha256sum -c --status || die "$url does not have PyPI's sha256 $sha"
        mv "$archive.part" "$archive"
    fi
    tmp=$(mktemp -d "$dest/extract.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    tar -xzf "$archive" -C "$tmp"
    vendored=$tmp/llama_cpp_python-$version/vendor/llama.cpp
    [[ -f $vendored/CMakeLists.txt ]] || die "$archive holds no vendor/llama.cpp"
    mv "$vendored" "$src"
fi

flags=()
((amx)) && flags=(-DCMAKE_C_FLAGS="-D__AMX_INT8__=1 -D__AMX_TILE__=1 -D__AMX_BF16__=1"
                  -DCMAKE_CXX_FLAGS="-D__AMX_INT8__=1 -D__AMX_TILE__=1 -D__AMX_BF16__=1")
echo "$name: configuring $build ($( ((amx)) && echo "with llama.cpp's AMX kernels" || echo "no AMX on this CPU"))" >&2
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DBUILD_SHARED_LIBS=OFF "${flags[@]}" >"$dest/configure.log" 2>&1 || die "cmake could not configure llama.cpp ($dest/configure.log)"
s=$(date +%s)
cmake --build "$build" --target llama-bench llama-quantize -j "$jobs" >"$dest/build.log" 2>&1 ||
    die "llama.cpp did not build ($dest/build.log)"
echo "$name: built llama-bench and llama-quantize in $(($(date +%s) - s)) s" >&2
echo "$build"
