# DiffusionGemma (uniform-state block diffusion on Gemma 4's MoE backbone): config, checkpoint and the
# encoder/decoder forward modes against transformers' DiffusionGemmaForBlockDiffusion on a tiny random
# model (tools/make_diffusion_gemma_fixtures.py wrote tests/data/families/diffusion_gemma_tiny).
dlm_test(test_diffusion_gemma test_diffusion_gemma.cpp CPU)
