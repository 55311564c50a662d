"""The catalogue of mapping findings: each DR2xx code's severity and wording.

Codes DR2xx are mapping findings (DR1xx is the recipe's arithmetic, DR3xx+ lint).
A `warning` is a mapping that changes what the engine does (`--strict` refuses it);
`info` is a faithful mapping the user should still know about; `error` means the
target cannot express the recipe at all, so nothing is written for it. Every reader
words a code from here (the emitters, the equivalence table `equivalence`, the field
table `carry`, `explain`), so the wording and severity live nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

from distrecipe.findings import Finding, Severity


@dataclass(frozen=True, slots=True)
class Code:
    """A mapping finding's fixed identity: severity and the one-line reason."""

    severity: Severity
    summary: str


CODES: dict[str, Code] = {
    "DR200": Code("info", "not emitted by --target all"),
    "DR201": Code("warning", "ZeRO-1 has no FSDP2 form; emitted as stage 2, which also shards gradients"),
    "DR202": Code(
        "warning",
        "optimizer-only offload has no FSDP2 form; FSDP2's CPU offload also moves parameters "
        "and gradients and runs the optimizer step on CPU",
    ),
    "DR203": Code(
        "info",
        "FSDP2's CPU offload of parameters also keeps gradients and the optimizer step on CPU",
    ),
    "DR204": Code("warning", "no NVMe offload in this engine; offloading to CPU memory instead"),
    "DR205": Code(
        "warning",
        "verl has no DDP actor; emitted FSDP2 with fsdp_size=1 (every rank holds a full copy)",
    ),
    "DR206": Code(
        "warning",
        "sequence parallelism becomes context parallelism (ring attention) instead of "
        "Ulysses all-to-all; the batch is split the same way",
    ),
    "DR207": Code("warning", "selective recompute is not expressible; whole blocks are recomputed"),
    "DR208": Code("error", "cannot express this recipe"),
    "DR209": Code(
        "warning",
        "Accelerate runs FSDP and multi-GPU only on GPUs; on CPU ranks it falls back to one "
        "non-distributed process",
    ),
    "DR210": Code(
        "warning",
        "verl's Megatron actor has no CPU parameter offload during training; param_offload only "
        "moves parameters to CPU between phases",
    ),
    "DR211": Code("info", "multi-node without launch.master_addr; pass the head node's address at launch"),
    "DR212": Code(
        "info",
        "verl always clips gradients; the recipe has no clipping, so clip_grad=inf (clips nothing)",
    ),
    "DR214": Code(
        "info",
        "HSDP, tensor and context parallel sizes are not TrainingArguments; launch with the "
        "emitted accelerate_config.yaml, whose parallelism_config the Trainer's Accelerator reads",
    ),
    "DR215": Code(
        "warning",
        "Adam with coupled (L2) weight decay has no form here; AdamW (decoupled decay) is used",
    ),
    "DR216": Code(
        "warning",
        "DeepSpeed ZeRO-1/2 has no hybrid sharding; optimizer state and gradients are sharded "
        "over all data-parallel ranks",
    ),
    "DR217": Code(
        "warning",
        "shard_group becomes ZeRO++ hpZ: a secondary parameter copy within each group, while "
        "optimizer state and gradients stay sharded over all data-parallel ranks (not HSDP)",
    ),
    "DR218": Code(
        "warning",
        "strategy megatron becomes DeepSpeed ZeRO data parallelism; tensor and pipeline "
        "parallelism need a Megatron mpu passed to deepspeed.initialize",
    ),
    "DR219": Code(
        "info",
        "tensor parallelism becomes DeepSpeed AutoTP (`tensor_parallel.autotp_size`); "
        "DeepSpeed's train_batch_size counts every rank of a tensor-parallel group, which "
        "share one batch, so it is the global batch × tensor",
    ),
    "DR220": Code("error", "the recipe breaks verl's batch rules; verl would refuse it"),
    "DR221": Code("error", "verl's workers cannot lay the rollout engine out on these GPUs, or it cannot "
                  "split the model's stated heads over its tensor parallelism; verl would refuse it after "
                  "the cluster starts"),
    "DR222": Code("warning", "not carried: the file has no key for it, so the training script decides "
                  "(the carry table in docs/equivalence.md names who)"),
    "DR223": Code("info", "the batch is the training script's: the file leaves it to the program's own "
                  "arguments (the HF Trainer's, Accelerate's DataLoader)"),
    "DR234": Code("info", "a stated setting this file has no key for and its engine does not use (the "
                  "launcher's settings, an FSDP wrap class under DeepSpeed): named, since the file alone "
                  "cannot carry it"),
    "DR235": Code("warning", "precision auto: the HF Trainer's --bf16 / --fp16 decide, and this file leaves "
                  "it to them; a program without the Trainer runs its own default"),
    "DR236": Code("info", "sharding over one shard is replication: the engine runs plain data parallelism, "
                  "the same job (no stage to write)"),
    "DR237": Code("info", "Adam without weight decay is AdamW's update: written as the engine's AdamW"),
    "DR238": Code("info", "the strategy runs as this engine's form of the same sharding (ZeRO as FSDP2, "
                  "FSDP as ZeRO): its file says the engine, not the recipe's word"),
    "DR225": Code("warning", "the learning-rate schedule is approximated: this engine's schedulers cannot "
                  "take its exact shape"),
    "DR226": Code("warning", "DeepSpeed's scheduler needs the run's length (total_num_steps) and the recipe "
                  "states none: the script or the Trainer must give it, or DeepSpeed refuses to start"),
    "DR227": Code("warning", "no tensor-parallel communication overlap in this engine; every tensor-parallel "
                  "gather and reduction is exposed"),
    "DR228": Code("warning", "no CPU-held activation checkpoints in this engine; the checkpoints stay in "
                  "GPU memory"),
    "DR229": Code("info", "cpu_checkpointing is honoured by programs that checkpoint through "
                  "deepspeed.checkpointing (Megatron-DeepSpeed); torch's and Hugging Face's gradient "
                  "checkpointing keep their checkpoints on the GPU"),
    "DR230": Code("warning", "no bf16 optimizer state beside fp32 master weights in this engine; Adam's "
                  "moments stay fp32"),
    "DR239": Code("warning", "pure bf16 (no fp32 master copy) is the training script's here: no key of this "
                  "file carries it; the script must cast the model to bf16 (`model.bfloat16()`, "
                  "`torch_dtype=torch.bfloat16`) and turn mixed precision off, or it trains with an fp32 "
                  "master copy"),
    "DR231": Code("warning", "the gradient reduction dtype is not a setting here; the engine reduces in its "
                  "own dtype"),
    "DR232": Code("warning", "expert parallelism is the training script's (DeepSpeed MoE's "
                  "`deepspeed.moe.layer.MoE(ep_size=...)`); no ds_config key carries it, so the script "
                  "must say the same"),
    "DR233": Code("warning", "a native section for another engine reaches no file of this target; each key "
                  "it states is named (compile that engine's target, or state the setting in the recipe)"),
}
"""Every mapping finding code with its severity; `explain DR2xx` can read `summary`."""


def finding(code: str, target: str, detail: str = "") -> Finding:
    """The finding for `code` on `target`, worded and graded from the catalogue.

    `detail` carries the numbers of this case; the reason is always the catalogue's,
    so two targets reporting the same code say the same thing.
    """
    entry = CODES[code]
    message = f"{target}: {entry.summary}" + (f" ({detail})" if detail else "")
    return Finding(code, message, entry.severity)
