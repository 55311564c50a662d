#!/bin/sh
# Fill .whl/ (ignored) with the wheels benchmarks/gpu_memory.py needs on the device machine
# and its image lacks: DeepSpeed and its pydantic and hjson. The image has Python 3.12 with
# torch, transformers, numpy, pyyaml, ninja and nvcc (/work/.library/device/KINDS.md);
# distrecipe's planning there needs only pyyaml. Versions are this venv's, so the device
# runs the DeepSpeed the oracles here run. DeepSpeed publishes no wheel: `pip wheel` builds
# its pure-Python one (no ops; FusedAdam is JIT-built on the GPU at its first use).
#
#     sh benchmarks/gpu_wheels.sh        # then carry .whl (docs/plan.md, "Measuring on a GPU")
set -eu
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
version() { "$python" -c "import importlib.metadata as m; print(m.version('$1'))"; }
rm -rf .whl && mkdir .whl
"$python" -m pip wheel -q --no-deps -w .whl "deepspeed==$(version deepspeed)"
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "hjson==$(version hjson)" "pydantic==$(version pydantic)" \
  "pydantic-core==$(version pydantic-core)" "annotated-types==$(version annotated-types)" \
  "typing-inspection==$(version typing-inspection)" "typing-extensions==$(version typing-extensions)"
ls .whl
