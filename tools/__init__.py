"""Development scripts (benchmarks, sample-data generators, docs generators): never shipped in the wheel."""
