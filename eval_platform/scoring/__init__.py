"""Classical (non-judge) scorers for benchmark tasks: one module per metric, one registry of names."""
