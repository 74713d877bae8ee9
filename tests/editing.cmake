# Revisable canvases: LLaDA 2.1's token-editing schedule, the llada21 presets against the published
# LLaDA2.1 generate() on the tiny LLaDA2 model (tools/make_llada21_fixtures.py), and streaming while a
# block can still change.
dlm_test(test_editing test_editing.cpp CPU)
