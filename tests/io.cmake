dlm_test(test_io test_io.cpp test_io_config.cpp test_io_paths.cpp CPU)
