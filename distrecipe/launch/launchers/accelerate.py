"""`accelerate launch --config_file …` for FSDP2, DDP or DeepSpeed through Accelerate.

The emitted YAML carries the engine settings; the machine fields (how many machines,
this one's rank, the main process address, total processes) are passed as flags,
which Accelerate lets override the file, so the same run-directory YAML serves every
node. Accumulation reaches `Accelerator()` through the environment (the YAML has no
key for it). The ds_config path is passed absolute, because the YAML's relative one
would resolve against the user's working directory. CPU ranks are refused: Accelerate
runs its distributed backends only on accelerators. Each rank's output is kept by
torchrun under the run directory: `accelerate launch` copies its `--log_dir` and
`--tee` into torchrun's arguments (`utils.launch._filter_args`; it has no
`--redirects`, and torchrun's tee implies the redirect). Every config distrecipe emits
runs through torchrun: several DeepSpeed nodes use the `standard` multinode launcher.
"""

from __future__ import annotations

from distrecipe.errors import LaunchError
from distrecipe.launch.launchers.deepspeed import DS_CONFIG
from distrecipe.launch.rundir import RANK_LOGS
from distrecipe.launch.spec import LaunchRequest, LaunchSpec, executable, job_env, program_argv


def build(request: LaunchRequest) -> LaunchSpec:
    from distrecipe.translator.accelerate import launch_env  # the emitter owns what Accelerate reads

    plan = request.plan
    if plan.recipe.cluster.device == "cpu":
        # `--cpu` makes Accelerate use its simple launcher (one process, not distributed)
        # and without it an FSDP/DDP launch on a GPU-less machine falls back to a
        # non-distributed Accelerator: either way not the recipe's ranks.
        raise LaunchError(f"Accelerate cannot run {plan.dims.world} CPU ranks (with --cpu it starts one "
                          "process); use launch.backend torchrun or deepspeed for cluster.device cpu")
    yamls = [name for name in request.configs if name.endswith((".yaml", ".yml"))]
    if len(yamls) != 1:
        raise LaunchError(f"accelerate needs one emitted config YAML, the emitter gave {yamls or 'none'}")
    argv = [executable("accelerate"), "launch", "--config_file", str(request.run_dir / yamls[0]),
            "--num_machines", str(plan.dims.nodes),
            "--machine_rank", str(request.node_rank),
            "--num_processes", str(plan.dims.world),
            "--main_process_ip", request.master(),
            "--main_process_port", str(request.master_port)]
    argv += ["--log_dir", str(request.run_dir / RANK_LOGS), "--tee", "3"]
    if plan.backend == "accelerate-deepspeed":
        argv += ["--deepspeed_config_file", str(request.run_dir / DS_CONFIG)]
    argv += program_argv(request.program, "--module")
    return LaunchSpec(argv=tuple(argv), env={**job_env(request), **launch_env(plan)})
