"""Running compiled programs: the executor, compile entry points, NNFactory checks."""
