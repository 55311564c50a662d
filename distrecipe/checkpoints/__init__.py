"""Checkpoints: read what an engine saved, say whether this job can load it, convert it.

`layout` reads a checkpoint folder from the engine's own files without torch (names,
`latest`, JSON), so `lint` can; `inspect` opens the `.pt` files DeepSpeed pickles (torch,
for `launch` and `distrecipe checkpoint` only); `verdict` applies the engines' load rules
(`docs/checkpoints.md` is generated from them); `convert` runs the engines' converters.
"""
