"""parallel.Meter on 2 CPU ranks with gloo: phases that add up to the step, the optimizer's parts to its step, the
whole model's FLOPs and MFU at every layout, the slow rank named, each rank's memory, the records on disk and in
TensorBoard."""

from __future__ import annotations

import json

import pytest
import torch

import metrics_cases as cases
import strategy
from rank_helpers import tiny_llama

DP2 = "hybrid_configs { dp_degree: 2 enable_optimizer_timer: true } metrics_configs { log_interval: 1 }"


def test_phases_add_up_to_the_step_and_the_optimizers_parts_to_its_step(pools, tmp_path):
    ranks = pools(2).run(cases.train, DP2, 10, out=str(tmp_path), timeout=120)
    for r in ranks:
        assert r["phase_share"] == pytest.approx(1.0, abs=0.05), r["phase_share"]
        assert r["optimizer_share"] == pytest.approx(1.0, abs=1e-6)
    lines = [json.loads(x) for x in (tmp_path / "metrics_rank1.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(1, 11)) and all(x["rank"] == 1 for x in lines)
    record = lines[-1]
    assert set(record["per_rank"]["optimizer"]) == {"reduce", "clip", "update", "sync"}
    assert record["straggler"] is None


def test_the_rank_that_sleeps_before_backward_is_named_and_the_other_waits(pools):
    ranks = pools(2).run(cases.train, DP2, 4, sleep_rank=1, sleep=0.2, timeout=120)
    last = ranks[0]["last"]
    assert last["straggler"] == 1
    assert last["per_rank"]["wait_seconds"][0] >= 0.15
    assert last["per_rank"]["busy_seconds"][1] >= last["per_rank"]["busy_seconds"][0] + 0.15


def test_each_ranks_peak_memory_is_its_own(pools):
    ranks = pools(2).run(cases.train, DP2, 3, grow_rank=1, timeout=120)
    peaks = ranks[0]["last"]["per_rank"]["memory_peak_bytes"]
    assert peaks[1] >= peaks[0] + 200 * 2**20, peaks


def _hand_mfu(seq: int) -> float:
    """6 · (every weight but the token embedding's) + 12 · layers · heads · head_dim · seq FLOPs a token, 4 · seq tokens
    a step, 0.5 s, one device of the world's, against 1e12."""
    model = tiny_llama(2, vocab=64, seq=seq)
    c = model.config
    matmul = sum(p.numel() for n, p in model.named_parameters() if "embed_tokens" not in n)
    per_token = 6 * matmul + 12 * c.num_hidden_layers * c.num_attention_heads * (c.hidden_size // c.num_attention_heads) * seq
    return per_token * 4 * seq / 0.5 / 1e12


@pytest.mark.parametrize("layout", ["", "hybrid_configs { mp_degree: 2 }", "hybrid_configs { sharding_degree: 2 }",
                                    "hybrid_configs { pp_degree: 2 } pipeline_configs { accumulate_steps: 2 }",
                                    "hybrid_configs { mp_degree: 2 sharding_degree: 2 }"],
                         ids=["one", "mp2", "sharding2", "pp2", "mp2-sharding2"])
def test_mfu_is_the_whole_models_at_every_layout(pools, layout):
    text = layout + " metrics_configs { log_interval: 1 peak_flops: 1e12 }"
    world = 1 if not layout else 4 if "mp_degree: 2 sharding" in layout else 2
    for r in pools(world).run(cases.mfu, text, 16, timeout=120):
        assert r["mfu"] * r["world"] == pytest.approx(_hand_mfu(16), rel=1e-9)


def test_the_flop_count_is_what_torchs_flop_counter_counts_of_a_step():
    """One forward and backward of the tiny Llama under FlopCounterMode, eager attention (the counter does not see
    the CPU's fused attention kernel): its matmuls and attention's products, within 1% (the count takes the norms'
    few weights for matmul ones)."""
    from torch.utils.flop_counter import FlopCounterMode

    seq, batch = 16, 4
    model = tiny_llama(2, vocab=64, seq=seq)
    model.config._attn_implementation = "eager"
    ids = torch.randint(0, 64, (batch, seq))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids).logits.sum().backward()
    counted = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert counted.get("aten.bmm", 0) > 0  # attention's products were counted
    per_token = _hand_mfu(seq) * 0.5 * 1e12 / (4 * seq)
    assert counter.get_total_flops() == pytest.approx(per_token * batch * seq, rel=0.01)


def test_tensorboards_reader_reads_back_what_a_run_wrote(pools, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    text = DP2.replace("log_interval: 1", "log_interval: 2 tensorboard: true dir: \"m\"")
    pools(2).run(cases.train, text, 4, out=str(tmp_path), timeout=120)
    events = EventAccumulator(str(tmp_path / "m" / "tensorboard"))
    events.Reload()
    assert {"tokens_per_second", "tflops", "step_seconds/max"} <= set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("tokens_per_second")] == [2, 4]


def test_the_strategys_timer_fields_validate_strictly_and_explain_shows_them_on(tmp_path, capsys):
    from strategy.cli import main

    path = tmp_path / "s.prototxt"
    path.write_text("hybrid_configs {\n  pp_degree: 2\n  enable_optimizer_timer: true\n  pp_configs { enable_timer: true "
                    "profiling: true }\n}\npipeline_configs { accumulate_steps: 4 }\nmetrics_configs { peak_flops: 1e12 }\n")
    assert main(["validate", "--policy", "strict", str(path)]) == 0
    capsys.readouterr()
    assert main(["explain", str(path)]) == 0
    shown = capsys.readouterr().out
    fields = ("enable_optimizer_timer", "pp_configs.enable_timer", "pp_configs.profiling")
    rows = [line for line in shown.splitlines() if any(f in line for f in fields)]
    assert len(rows) == 3 and all(r.split()[1:] == ["true", "set", "on"] for r in rows), rows
    resolved = strategy.resolve(strategy.load(path))
    assert resolved.optimizer_timer and resolved.pipeline.timer and resolved.pipeline.profiling


def test_the_straggler_is_the_rank_busy_longest_above_the_median_by_the_threshold():
    from parallel.metrics.meter import _straggler

    assert _straggler([0.1, 0.1, 0.5], 0.25) == 2
    assert _straggler([0.1, 0.105], 0.25) is None  # within the threshold
    assert _straggler([0.002, 0.009], 0.25) is None  # above it, but within timer noise
    assert _straggler([0.3], 0.25) is None


def test_a_phase_the_meter_was_not_given_is_an_error_naming_its_phases(pools):
    assert pools(1).run(cases.unknown_phase, timeout=60) == ["phase 'loss' is not one of this meter's phases "
                                                             "['data', 'forward', 'backward', 'optimizer']: name it when "
                                                             "creating the Meter (phases=...), the same on every rank"]


@pytest.mark.parametrize("schedule", ["FThenB", "1F1B"])
def test_pipeline_timers_see_the_slow_stage_and_the_wait_and_the_timeline_has_every_micro_batch(pools, tmp_path,
                                                                                              schedule):
    text = (f'hybrid_configs {{ pp_degree: 2 pp_configs {{ enable_timer: true profiling: true }} }} pipeline_configs {{ '
            f'accumulate_steps: 4 micro_batch_size: 1 schedule_mode: "{schedule}" }} metrics_configs {{ log_interval: 1 }}')
    ranks = pools(2).run(cases.pipeline, text, str(tmp_path), 0.05, timeout=120)
    stages = ranks[0]["last"]["per_rank"]["pipeline"]
    assert ranks[0]["last"]["loss"] == pytest.approx(ranks[1]["loss"])  # the last stage's, on the rank that logs
    assert stages["forward"][1] >= 0.2, stages  # stage 1: 4 micro-batches of 50 ms
    assert stages["wait"][0] >= 0.15, stages  # stage 0 waits for it
    trace = json.loads((tmp_path / "pipeline_timeline.json").read_text())
    assert trace["step"] == 2 and (tmp_path / "pipeline_timeline.png").is_file()
    for stage in (0, 1):
        events = sorted((e["ts"], e["ts"] + e["dur"], e["cat"]) for e in trace["traceEvents"]
                        if e["ph"] == "X" and e["tid"] == stage)
        assert [kind for *_, kind in events].count("forward") == 4 and [k for *_, k in events].count("backward") == 4
        assert all(a[1] <= b[0] for a, b in zip(events, events[1:])), events  # none overlap on a row


def test_a_step_out_of_memory_writes_the_ranks_snapshot_and_goes_on_failing(pools, tmp_path):
    """On CUDA the allocator's snapshot (recorded from the Meter's start); on a CPU the peak the meter reads."""
    assert pools(1).run(cases.out_of_memory, str(tmp_path), timeout=60) == ["out of memory (a test's)"]
    snapshot = json.loads((tmp_path / "memory_snapshot_rank0.json").read_text())
    assert snapshot["step"] == 3 and snapshot["peak_bytes"] > 2**20


@pytest.mark.parametrize("kind", ["qwen3_moe", "mixtral"])
def test_experts_count_as_far_as_tokens_use_them_with_or_without_expert_parallelism(pools, kind):
    """6 · (dense weights + experts' · top-k / E) + attention a token, the same at ep 1 and at ep 2."""
    from hf_models import moe

    model = moe(kind)
    c = model.config
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    dense = sum(p.numel() for n, p in model.named_parameters() if ".experts." not in n and "embed_tokens" not in n)
    hand = 6 * (dense + experts * 2 / 8) + 12 * c.num_hidden_layers * c.num_attention_heads * 8 * 16
    assert pools(1).run(cases.moe_flops, "", kind, timeout=120) == [pytest.approx(hand, rel=1e-9)]
    assert pools(2).run(cases.moe_flops, "hybrid_configs { dp_degree: 2 ep_degree: 2 }", kind,
                        timeout=120) == [pytest.approx(hand, rel=1e-9)] * 2
