# Natively block-causal families (SDAR, ...): loading, logits and decoded trajectories against each
# family's published code (tools/make_family_fixtures.py).
dlm_test(test_families test_families.cpp CPU)
