# The step-wise engine: joining a running batch, cancel, failure isolation, the committed prefix.
dlm_test(test_engine test_engine.cpp CPU)
