"""One run of the refinement loop: the langgraph graph and its state, the run directory (the run's one truth) and resuming from it, judging a round, the sweep, prompts, progress."""
