"""Many problems: `krefine bench` (one process per GPU or judge actors on Ray), seeds compiled ahead, results and their tables."""
