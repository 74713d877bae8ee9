#!/usr/bin/python3
"""Writes tests/data/quant/: random blocks of each GGUF block type dlm multiplies, and the values the
`gguf` package's numpy decoder (gguf.quants.dequantize, the reference llama.cpp's Python tools use)
gives them. tests/test_quant.cpp checks dlm::cpu::quant::dequantize_row against these values.

For each type (q8_0, q4_0, q4_k, q5_k, q6_k) two little-endian files:
  <type>.blocks  6 rows of 512 elements as raw blocks (random bytes; every f16 scale field set to a
                 finite random value, some negative, so no block decodes to inf or NaN)
  <type>.f32     the 6 x 512 decoded values, f32

Set up once:
    python3 -m venv build/venv-gguf && build/venv-gguf/bin/pip install gguf numpy
Usage:
    build/venv-gguf/bin/python tools/make_quant_fixtures.py [output_dir]   # default tests/data/quant
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, GGML_QUANT_SIZES

ROWS, COLS = 6, 512
# Byte offsets of the f16 scale fields inside one block.
HALF_FIELDS = {"q8_0": [0], "q4_0": [0], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}
TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_k": T.Q4_K, "q5_k": T.Q5_K, "q6_k": T.Q6_K}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "data", "quant")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(14)
    for name, qt in TYPES.items():
        block, size = GGML_QUANT_SIZES[qt]
        n_blocks = ROWS * COLS // block
        raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
        for off in HALF_FIELDS[name]:
            halves = (rng.uniform(-1, 1, n_blocks) * 2.0 ** rng.integers(-12, 2, n_blocks)).astype(np.float16)
            raw[:, off:off + 2] = halves.view(np.uint8).reshape(n_blocks, 2)
        rows = raw.reshape(ROWS, -1)
        values = dequantize(rows, qt).astype("<f4")
        assert values.shape == (ROWS, COLS) and np.isfinite(values).all()
        rows.tofile(os.path.join(out, name + ".blocks"))
        values.tofile(os.path.join(out, name + ".f32"))
        print(f"{name}: {rows.nbytes} bytes of blocks, {values.size} values")


if __name__ == "__main__":
    main()
