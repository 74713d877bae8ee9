# Hardening: a typed error for every bad input (docs/errors.md lists each case and its test) and
# reproducible decoding across runs, thread counts and batch positions (docs/determinism.md).
dlm_test(test_errors test_errors.cpp CPU)
dlm_test(test_determinism test_determinism.cpp CPU)
