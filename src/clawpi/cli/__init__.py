"""Front end: the `clawpi` command (run in text/json/rpc modes, models, sessions)."""
