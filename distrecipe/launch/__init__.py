"""Launch: turn a resolved `Plan` into a running job through an engine's own launcher.

`launchers/` builds argv and env (one module per launcher), `rundir` records what was
started, `supervise` runs it and owns every process it spawns, `tiny_train` is the
reference trainer the demo and the equivalence tests run. Only the trainer imports
torch or an engine, and only inside the rank processes.
"""
