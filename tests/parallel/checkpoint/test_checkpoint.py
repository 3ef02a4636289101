"""parallel.save / load / full_state_dict on torch.distributed.checkpoint: exact resume, resharding, safety."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import checkpoint_cases as cases
from conftest import ROOT


@pytest.mark.parametrize("flags", [(False, False, False), (True, True, True)], ids=["no_flags", "all_flags"])
def test_resume_continues_exactly_where_the_straight_run_went(pools, tmp_path, flags):
    result = pools(2).run(cases.straight_vs_resumed, 2, flags, 3, str(tmp_path / "ckpt"))[0]
    assert result["resumed"] == pytest.approx(result["straight"], rel=1e-6)


SHARDING2_STAGE3 = "hybrid_configs { sharding_degree: 2 sharding_configs { stage: 3 } }"


@pytest.fixture(scope="module")
def saved_at_sharding2_stage3(pools, tmp_path_factory):
    path = tmp_path_factory.mktemp("sharded") / "ckpt"
    result = pools(2).run(cases.save_gpt, 1, 1, 3, str(path), SHARDING2_STAGE3, timeout=180)[0]
    return path, result


@pytest.mark.parametrize(("world", "text", "resharded"), [
    (4, "hybrid_configs { sharding_degree: 4 sharding_configs { stage: 1 } }", "sharding 2 -> 4"),
    (4, "hybrid_configs { mp_degree: 2 sharding_degree: 2 sharding_configs { stage: 2 } }", "mp 1 -> 2"),
    (1, "hybrid_configs { dp_degree: 1 }", "sharding 2 -> 1"),
], ids=["sharding4_stage1", "mp2_x_sharding2_stage2", "one_process"])
def test_a_sharded_checkpoint_loads_at_other_degrees_and_stages_exactly(pools, saved_at_sharding2_stage3, world, text,
                                                                         resharded):
    path, saved = saved_at_sharding2_stage3
    loaded = pools(world).run(cases.load_gpt, 1, 1, 3, str(path), text, timeout=180)[0]
    assert loaded["full"].keys() == saved["full"].keys()
    for key, value in saved["full"].items():
        assert torch.equal(loaded["full"][key], value), key
    assert loaded["layout"]["sharding"] == 2 and loaded["resharded"] == resharded
    assert loaded["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-5)  # optimizer state came back too


@pytest.fixture(scope="module")
def saved_at_mp2(pools, tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "mp2"
    result = pools(2).run(cases.save_gpt, 2, 1, 3, str(path))[0]
    return path, result


@pytest.mark.parametrize(("mp", "dp"), [(1, 1), (4, 1), (2, 1)], ids=["mp1_one_process", "mp4", "mp2_same"])
def test_a_checkpoint_saved_at_mp2_loads_into_any_layout_exactly(pools, saved_at_mp2, mp, dp):
    path, saved = saved_at_mp2
    loaded = pools(mp * dp).run(cases.load_gpt, mp, dp, 3, str(path), timeout=180)[0]
    assert loaded["full"].keys() == saved["full"].keys()
    for key, value in saved["full"].items():
        assert torch.equal(loaded["full"][key], value), key
    assert (loaded["step"], loaded["extra"], loaded["layout"]) == (3, {"note": "from mp test"}, {"dp": 1, "pp": 1, "sharding": 1, "sep": 1, "cp": 1, "mp": 2, "world_size": 2})
    assert loaded["resharded"] == (None if mp == 2 else f"mp 2 -> {mp}")
    assert [w for w in loaded["warnings"] if "resharded" in w] == ([] if mp == 2 else [
        f"{path}: saved with dp 1 x mp 2 (2 ranks), loaded into dp 1 x mp {mp} ({mp} ranks) "
        f"(mp 2 -> {mp}): resharded by DCP"])
    assert "mp_degree: 2" in loaded["strategy"]
    assert loaded["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-5)  # training goes on the same


def test_dp2_mp2_reshards_to_dp1_mp4(pools, tmp_path):
    path = tmp_path / "dp2mp2"
    saved = pools(4).run(cases.save_gpt, 2, 2, 2, str(path), timeout=180)[0]
    loaded = pools(4).run(cases.load_gpt, 4, 1, 2, str(path), timeout=180)[0]
    for key, value in saved["full"].items():
        assert torch.equal(loaded["full"][key], value), key
    assert loaded["resharded"] == "dp 2 -> 1, mp 2 -> 4"
    assert loaded["next_loss"] == pytest.approx(saved["next_loss"], rel=1e-5)


@pytest.mark.parametrize(("change", "expected"), [
    ("wider", "model.tokens.weight: the checkpoint holds global shape [256, 128], the model needs [256, 256]"),
    ("deeper", "model.blocks.2.ln1.weight: missing from the checkpoint (the model has it, shape [128])"),
])
def test_a_checkpoint_that_does_not_fit_names_the_key_and_shapes_and_loads_nothing(pools, saved_at_mp2, change, expected):
    message, untouched = pools(2).run(cases.load_error, 2, str(saved_at_mp2[0]), change)[0]
    assert message.startswith(f"{saved_at_mp2[0]}: the checkpoint does not fit the model; nothing was loaded:")
    assert expected in message
    assert untouched


def test_a_directory_that_is_not_a_finished_checkpoint_is_refused(pools, tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "__0_0.distcp").write_bytes(b"partial")
    message, untouched = pools(2).run(cases.load_error, 2, str(tmp_path / "half"), "none")[0]
    assert message == (f"{tmp_path / 'half'}: not a finished checkpoint (no checkpoint.json or DCP .metadata): "
                       "a save that did not complete, or another directory")
    assert untouched


def test_full_state_dict_of_a_parallelised_llama_loads_into_a_plain_one_with_the_same_logits(pools):
    assert pools(2).run(cases.hf_full_state_dict_round_trip, 2)[0] < 1e-5


def test_the_cli_shows_a_checkpoint_and_exports_the_full_model(saved_at_mp2, tmp_path):
    from safetensors.torch import load_file

    path, saved = saved_at_mp2
    shown = subprocess.run([sys.executable, "-m", "strategy", "checkpoint", str(path)], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "step: 3" in shown.stdout and "layout: dp 1 x mp 2 (2 ranks)" in shown.stdout
    assert "model.tokens.weight" in shown.stdout and "[256, 128] float32" in shown.stdout
    out = tmp_path / "model.safetensors"
    exported = subprocess.run([sys.executable, "-m", "strategy", "checkpoint", str(path), "--export", str(out)],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    tensors = load_file(out)
    assert tensors.keys() == saved["full"].keys()
    for key, value in saved["full"].items():
        assert torch.equal(tensors[key], value), key
    assert not list(tmp_path.glob(".model.safetensors.*"))  # no temporary left behind


@pytest.mark.timeout(240)
def test_the_demo_saves_and_resumes_in_new_processes(tmp_path):
    out = tmp_path / "run"
    base = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(ROOT / "examples" / "train_gpt.py"),
            "--strategy", str(ROOT / "examples" / "strategies" / "mp2_all_flags.prototxt"), "--batch-size", "8", "--seq-len", "32"]
    first = subprocess.run(base + ["--steps", "4", "--save-every", "2", "--out", str(out)], capture_output=True, text=True, timeout=200)
    assert first.returncode == 0, first.stderr[-2000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2", "step-4"]  # keep_last 2
    marker = json.loads((out / "checkpoints" / "step-4" / "checkpoint.json").read_text())
    assert marker["step"] == 4
    second = subprocess.run(base + ["--steps", "6", "--resume", str(out / "checkpoints" / "step-4"), "--out",
                                    str(tmp_path / "run2")],
                            capture_output=True, text=True, timeout=200)
    assert second.returncode == 0, second.stderr[-2000:]
    summary = json.loads((tmp_path / "run2" / "summary.json").read_text())
    assert summary["first_step"] == 4 and len(summary["losses"]) == 2


def _dies_mid_save(rank: int, port: int, directory: str, results) -> None:
    import os

    from distributed import rank_env

    os.environ.update(rank_env(rank, 2, port))
    import parallel
    import parallel.checkpoint.save_load as checkpoint
    from rank_helpers import make_strategy

    torch.set_num_threads(1)
    parallel.init(make_strategy(2), timeout=10)
    model = cases.small_model(0)
    parallel.save(f"{directory}/ckpt", model, step=1)
    first = parallel.full_state_dict(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    if rank == 1:
        real_save = checkpoint.dcp.save

        def save_then_die(*args, **kwargs):
            real_save(*args, **kwargs)  # its shards are on disk; the checkpoint is not finished
            os._exit(3)

        checkpoint.dcp.save = save_then_die
    try:
        parallel.save(f"{directory}/ckpt", model, step=2)
        results.put(("finished", None))
    except BaseException as e:  # noqa: BLE001
        results.put((type(e).__name__, {k: v.tolist() for k, v in first.items()}))
    results.close()
    results.join_thread()
    os._exit(0)


@pytest.mark.timeout(120)
def test_a_rank_killed_mid_save_leaves_the_previous_checkpoint_whole(pools, tmp_path):
    import multiprocessing as mp

    from distributed import free_port

    ctx = mp.get_context("spawn")
    port, results = free_port(), ctx.Queue()
    procs = [ctx.Process(target=_dies_mid_save, args=(r, port, str(tmp_path), results), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    kind, first = results.get(timeout=100)
    for p in procs:
        p.join(timeout=20)
    assert kind != "finished"  # rank 0 saw its peer die instead of finishing the save
    loaded = pools(1).run(cases.load_small, str(tmp_path / "ckpt"))[0]
    assert loaded["step"] == 1
    assert {k: v.tolist() for k, v in loaded["full"].items()} == first
    debris = list(tmp_path.glob(".ckpt.partial-*"))
    assert len(debris) == 1 and not (debris[0] / "checkpoint.json").exists()
    message = pools(1).run(cases.load_error, 1, str(debris[0]), "none")[0][0]
    assert "not a finished checkpoint" in message


def test_a_checkpoint_saved_before_the_first_step_loads_with_an_optimizer(pools, tmp_path):
    assert pools(2).run(cases.save_before_the_first_step_then_load, str(tmp_path / "early")) == [0, 0]
