# Golden trajectories: each preset against its reference implementation (tools/make_trajectory_fixtures.py).
dlm_test(test_golden test_golden.cpp CPU)
