# Decoding real models: defaults from the model folder, exact caching checked on the real transformer.
dlm_test(test_model_decoding test_model_decoding.cpp CPU)
