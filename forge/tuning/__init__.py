"""The cost model and what searches with it: ablation, autotuning, calibration."""
