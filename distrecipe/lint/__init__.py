"""`distrecipe lint`: catch on a laptop what the engines report on a booked cluster, or never.

Recipes and hand-written native configs (DeepSpeed JSON, Accelerate YAML, verl YAML or
override lists, HF TrainingArguments JSON) are read with positions (`kinds.py`), each
rule is one function whose docstring is its documentation (`rules/`), listed in one
explicit registry (`rules/__init__.py`); `engine.py` runs them, applies suppressions
and configured severities, and `formats.py` prints the findings. Nothing here imports
torch or an engine.
"""
