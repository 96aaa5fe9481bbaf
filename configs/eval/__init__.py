"""Evaluation suites for `launch.eval --suite=configs/eval/<name>.py[:arg]`: `get_config(arg)` returns the
`suite` entries, the `benchmarks` to run (in table order) and, where entries read files, `data_root`."""
