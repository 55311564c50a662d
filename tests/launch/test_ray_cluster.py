"""verl on a real Ray cluster: two raylets on this machine, the RayJob's entrypoint submitted.

The cluster is what KubeRay builds from the RayJob, on loopback: a head and a second
raylet, each with one (fake) GPU, and the entrypoint goes through `ray job submit`
pasted into `bash -c` as KubeRay's submitter runs it. verl cannot train without GPUs,
so the test is that the job reaches verl's own resource check with the right counts:
the 2 GPUs of *both* raylets (a driver that started a cluster of its own would see
none) against the 2 nodes × 2 GPUs the recipe's overrides ask for
(`verl/single_controller/ray/base.py`, `_check_resource_available`), after verl has
composed and validated the config, loaded the tokenizer and built the datasets.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrecipe.commands.launch import launch
from tests.launch.ray_cluster import RayCluster, session_members

pytestmark = pytest.mark.slow  # one worker runs every cluster test (conftest.CLUSTERS)

RECIPE = Path(__file__).parent / "rl-tiny-2x2.yaml"
VERL_CORE = ("transfer_queue", "cachetools", "uvicorn", "fastapi")
"""verl's `verl-core` extra, which its PPO trainer imports (the test extra installs them)."""


@pytest.fixture
def ray_cluster() -> Iterator[RayCluster]:
    if not (Path(sys.executable).parent / "ray").exists():
        pytest.skip("ray is not installed beside this Python")
    pytest.importorskip("verl", reason="verl is not installed")
    for module in VERL_CORE:
        pytest.importorskip(module, reason="verl's verl-core extra: its PPO trainer imports it")
    # Ray's socket paths must fit in 107 bytes: a short directory, not pytest's tmp_path.
    cluster = RayCluster(Path(tempfile.mkdtemp(prefix="dr-ray-")), gpus=1, cpus=8)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        left = session_members({leader.pid for leader in cluster.leaders})
        if not left:
            shutil.rmtree(cluster.workdir, ignore_errors=True)
        assert left == [], f"Ray processes outlived stop: {left} (logs in {cluster.workdir})"


def tiny_model_and_data(root: Path) -> dict[str, str]:
    """A 12-word tokenizer with a chat template, a two-layer Llama config, and prompts."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", "user", "assistant", "what", "is", "one", "plus", "two", "?", "three"]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<unk>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}"
                          "{% if add_generation_prompt %}assistant {% endif %}")
    model = root / "model"
    fast.save_pretrained(model)
    LlamaConfig(vocab_size=len(words), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128, pad_token_id=0,
                eos_token_id=1, architectures=["LlamaForCausalLM"]).save_pretrained(model)
    rows = [{"data_source": "tiny", "prompt": [{"role": "user", "content": "what is one plus two ?"}],
             "reward_model": {"style": "rule", "ground_truth": "three"}, "extra_info": {"index": i}}
            for i in range(32)]
    pq.write_table(pa.Table.from_pylist(rows), root / "train.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:8]), root / "val.parquet")
    return {"model": str(model), "train": str(root / "train.parquet"), "val": str(root / "val.parquet")}


def entrypoint(capsys: pytest.CaptureFixture[str], data: dict[str, str]) -> str:
    program = (f"data.train_files={data['train']}", f"data.val_files={data['val']}",
               f"actor_rollout_ref.model.path={data['model']}", "data.max_prompt_length=32",
               "data.max_response_length=16", "algorithm.adv_estimator=grpo", "trainer.logger=[console]")
    capsys.readouterr()
    assert launch(recipe=str(RECIPE), k8s=True, program=program, environ={}) == 0
    manifest: dict[str, Any] = yaml.safe_load(capsys.readouterr().out)
    [group] = manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == 2 and group["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": 2}}
    text: str = manifest["spec"]["entrypoint"]
    assert "trainer.nnodes=2" in text.split() and "trainer.n_gpus_per_node=2" in text.split()
    return text


def test_verl_joins_both_raylets_and_reaches_its_gpu_check(
        ray_cluster: RayCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = entrypoint(capsys, tiny_model_and_data(tmp_path / "data"))
    done = ray_cluster.submit(text, timeout=480)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "ValueError: Total available GPUs 2.0 is less than total desired GPUs 4" in out, out[-5000:]
    assert "LexerNoViableAltException" not in out and "Error in call to target" not in out
