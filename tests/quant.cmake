# GGUF block types (dlm/cpu/quant): decoding against the gguf package's numpy decoder, the encoders,
# and the quantized products of every instruction set.
dlm_test(test_quant test_quant.cpp CPU)
