"""Every strategy file PaddlePaddle 3.3.1 wrote loads unchanged, writes back byte for byte, and resolves as documented."""

from __future__ import annotations

import warnings

import pytest

import strategy
from conftest import PADDLE_CASES, PADDLE_FIXTURES, PADDLE_IMPLEMENTED_CASES

ENCODINGS = {"prototxt": "prototxt", "json": "json", "binpb": "binary"}
# Paddle picks sequence parallelism by layer class; this project's switch says it in the strategy, and
# llama's recompute_allgather and sp_async_reduce_scatter require it.
SEQUENCE_PARALLEL = ["hybrid_configs.mp_configs.sequence_parallel=true"]


def load(path, **kwargs) -> strategy.DistributedStrategy:
    """Strictly; a file that breaks a `requires` rule under the warn policy, which keeps it as it is."""
    try:
        return strategy.load(path, **kwargs)
    except strategy.StrategyError:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", strategy.StrategyWarning)
            return strategy.load(path, policy="warn", **kwargs)


def test_every_paddle_case_is_present():
    assert PADDLE_CASES == ["dp2_tp2_sync_average", "llama_tp2_sp", "ps_async", "static_amp_merge", "tp2_async_skip", "tp2_defaults"]


@pytest.mark.parametrize("case", PADDLE_CASES)
def test_three_encodings_load_to_the_same_message(case):
    loaded = [load(PADDLE_FIXTURES / f"{case}.{ext}") for ext in ENCODINGS]
    assert loaded[0] == loaded[1] == loaded[2]
    assert loaded[0].ByteSize() > 0


@pytest.mark.parametrize("case", PADDLE_CASES)
@pytest.mark.parametrize("ext", list(ENCODINGS))
def test_dump_reproduces_paddles_bytes(case, ext):
    source = PADDLE_FIXTURES / f"{case}.{ext}"
    out = strategy.dumps(load(source), format=ENCODINGS[ext])
    expected = source.read_bytes()
    got = out if isinstance(out, bytes) else out.encode()
    # MessageToJson output has no trailing newline; ours ends the file with one.
    assert got.rstrip(b"\n") == expected.rstrip(b"\n")


@pytest.mark.filterwarnings("ignore::strategy.StrategyWarning")  # llama's flags that need this project's switch
@pytest.mark.parametrize("case", PADDLE_CASES)
def test_text_json_yaml_binary_text_round_trip_is_lossless(case):
    original = load(PADDLE_FIXTURES / f"{case}.prototxt")
    current = original
    for fmt in ["json", "yaml", "binary", "prototxt"]:
        current = strategy.loads(strategy.dumps(current, format=fmt), format=fmt, policy="warn")
        assert current == original, fmt
    assert strategy.dumps(current) == (PADDLE_FIXTURES / f"{case}.prototxt").read_text()


def test_paddle_values_survive():
    s = strategy.load(PADDLE_FIXTURES / "dp2_tp2_sync_average.binpb")
    mp = s.hybrid_configs.mp_configs
    assert (s.hybrid_configs.dp_degree, mp.sync_param, mp.sync_grad, mp.sync_moment, mp.sync_mode) == (2, True, True, True, "average")
    resolved = strategy.resolve(s, world_size=4)
    assert (resolved.dp_degree, resolved.mp_degree) == (2, 2)
    assert resolved.mp.sync_mode == "average"


def test_paddle_async_skip_resolves_both_flags_on():
    resolved = strategy.resolve(strategy.load(PADDLE_FIXTURES / "tp2_async_skip.prototxt"), world_size=2)
    assert resolved.mp.async_allreduce and resolved.mp.skip_c_identity
    assert not resolved.mp.fused_linear_param_grad_add
    assert resolved.notes == ()


@pytest.mark.parametrize("case", PADDLE_IMPLEMENTED_CASES)
def test_files_that_set_only_implemented_fields_resolve_strictly_without_notes_or_warnings(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolved = strategy.resolve(strategy.load(PADDLE_FIXTURES / f"{case}.prototxt"), world_size=4 if "dp2" in case else 2)
    assert all("no effect" not in note for note in resolved.notes)


# A file a Paddle user could write with features this project does not implement (yet).
LEGACY = """localsgd: true
sync_batch_norm: true
hybrid_configs {
  sharding_degree: 2
  sharding_configs { offload_opt_buffer_size: 8 }
}
amp: true
amp_configs {
  use_optimizer_fp16: true
}
"""
LEGACY_UNIMPLEMENTED = [
    (1, 1, "localsgd = true", "PostLocalSGDOptimizer"),
    (2, 1, "sync_batch_norm = true", "torch.nn.SyncBatchNorm.convert_sync_batchnorm"),
    (5, 22, "hybrid_configs.sharding_configs.offload_opt_buffer_size = 8", "CPUOffloadPolicy"),
    (9, 3, "amp_configs.use_optimizer_fp16 = true", "fp32 masters"),
]


def test_strict_resolve_names_every_not_implemented_setting_at_its_line(write):
    path = write("legacy.prototxt", LEGACY)
    s = strategy.load(path)  # loading is lossless: resolving judges what the runtime can do
    with pytest.raises(strategy.StrategyError) as caught:
        strategy.resolve(s, world_size=4)
    e = caught.value
    assert (e.source, e.line, e.column, e.field) == (str(path), 1, 1, "localsgd")
    lines = str(e).splitlines()
    assert len(lines) == len(LEGACY_UNIMPLEMENTED)
    for line, (row, col, setting, hint) in zip(lines, LEGACY_UNIMPLEMENTED):
        assert line.startswith(f"{path}:{row}:{col}: {setting} is not implemented by this project; "), line
        assert hint in line


def test_warn_resolves_them_as_their_defaults_with_a_located_warning_each(write):
    path = write("legacy.prototxt", LEGACY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolved = strategy.resolve(strategy.load(path), world_size=2, policy="warn")
    ignored = [str(w.message).split(": ")[0] for w in caught if "ignored (policy 'warn')" in str(w.message)]
    assert ignored == [f"{path}:{row}:{col}" for row, col, *_ in LEGACY_UNIMPLEMENTED]
    assert resolved.sharding_degree == 2 and resolved.dp_degree == 1 and resolved.amp.enabled


@pytest.mark.parametrize("case", ["llama_tp2_sp", "static_amp_merge"])
def test_the_amp_recompute_and_merge_files_resolve_strictly(case):
    overrides = SEQUENCE_PARALLEL if case == "llama_tp2_sp" else []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolved = strategy.resolve(strategy.load(PADDLE_FIXTURES / f"{case}.prototxt", overrides=overrides), world_size=2)
    assert resolved.amp.enabled and resolved.recompute.enabled
    if case == "llama_tp2_sp":
        assert (resolved.amp.dtype, resolved.amp.pure, resolved.amp.loss_scaling) == ("bfloat16", True, False)
        assert "amp_configs.init_loss_scaling is set but has no effect: bfloat16 needs no loss scaling." in resolved.notes
        assert resolved.mp.sequence_parallel and resolved.mp.recompute_allgather and resolved.mp.sp_async_reduce_scatter
    else:
        assert (resolved.amp.dtype, resolved.amp.incr_every_n_steps, resolved.amp.decr_ratio) == ("float16", 500, 0.5)
        assert (resolved.gradient_merge.k_steps, resolved.gradient_merge.avg) == (4, True)
        assert resolved.recompute.checkpoints == ("fc_0.tmp_0", "fc_1.tmp_0")


def test_settings_that_only_change_defaults_or_sit_in_inactive_messages_never_error():
    # llama sets pp_configs.delay_scale_loss (pp_degree is 1) and explicit defaults (pp_degree: 1, tensor_fusion: false).
    s = strategy.load(PADDLE_FIXTURES / "llama_tp2_sp.prototxt", overrides=SEQUENCE_PARALLEL)
    resolved = strategy.resolve(s, world_size=2)
    assert "hybrid_configs.pp_configs.delay_scale_loss is set but has no effect: hybrid_configs.pp_degree is 1." in resolved.notes
    assert not any("tensor_fusion" in n for n in resolved.notes)  # an implemented flag left off: nothing to say


def test_parameter_server_file_resolves_with_notes_only():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolved = strategy.resolve(strategy.load(PADDLE_FIXTURES / "ps_async.prototxt"), world_size=1)
    no_effect = [n for n in resolved.notes if "has no effect in PyTorch: parameter-server training is Paddle's" in n]
    assert [n.split(" is set")[0] for n in no_effect] == [
        "a_sync", "a_sync_configs.k_steps", "a_sync_configs.send_queue_size", "a_sync_configs.launch_barrier"]


@pytest.mark.parametrize("case", PADDLE_CASES)
def test_every_paddle_file_resolves_under_warn(case):
    path = PADDLE_FIXTURES / f"{case}.prototxt"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolved = strategy.resolve(strategy.load(path, policy="warn"), world_size=4 if "dp2" in case else 2, policy="warn")
    assert not [w for w in caught if "ignored (policy 'warn')" in str(w.message)]  # Paddle's files use what is implemented
    assert resolved.world_size == (4 if "dp2" in case else 2)
    if case == "llama_tp2_sp":  # Paddle's behaviour for flags whose requirement is off: off, here with a warning
        turned_off = [str(w.message).split(": ")[0] for w in caught if "resolving" in str(w.message)]
        assert turned_off == [f"{path}:16:5", f"{path}:17:5"]  # once, at load
        assert not (resolved.mp.recompute_allgather or resolved.mp.sp_async_reduce_scatter)


def test_warn_resolves_an_ignored_setting_as_its_default():
    s = strategy.loads("lamb: true hybrid_configs { dp_degree: -1 sharding_degree: 2 }")
    with pytest.warns(strategy.StrategyWarning, match=r"<string>:1:1: lamb = true is not implemented by this project; "
                      "wrap a LAMB torch optimizer in HybridParallelOptimizer; ignored"):
        resolved = strategy.resolve(s, world_size=4, policy="warn")
    assert (resolved.dp_degree, resolved.sharding_degree) == (2, 2)
    assert s.lamb  # the caller's message is left as it was
