"""The constant sweep's variants: a candidate's Triton launch constants rewritten
(sweep.py; knobs.py finds them, template.py reads Inductor's templates). No loop state:
agent/loop/sweep_plan.py chooses which variants a run judges."""
