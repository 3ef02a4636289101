"""Resolution: degrees against the world size, flags gated exactly as the rules say, with notes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings

import strategy
from conftest import explain_rows
from strategies import examples, messages
from strategy import StrategyError


def make(mp_degree=2, dp_degree=None, **mp_flags) -> strategy.DistributedStrategy:
    s = strategy.DistributedStrategy()
    s.hybrid_configs.mp_degree = mp_degree
    if dp_degree is not None:
        s.hybrid_configs.dp_degree = dp_degree
    for name, value in mp_flags.items():
        setattr(s.hybrid_configs.mp_configs, name, value)
    return s


@pytest.mark.parametrize("mp_degree", [1, 2, 4])
@pytest.mark.parametrize(("f5", "f6", "f7"), list(itertools.product([False, True], repeat=3)))
def test_effective_flags_follow_the_rules(mp_degree, f5, f6, f7):
    s = make(mp_degree, mp_async_allreduce=f5, mp_skip_c_identity=f6, mp_fused_linear_param_grad_add=f7)
    broken = (f6 or f7) and not f5
    if broken:
        with pytest.raises(StrategyError, match="requires hybrid_configs.mp_configs.mp_async_allreduce: true"):
            strategy.resolve(s, world_size=mp_degree)
        with pytest.warns(strategy.StrategyWarning):
            resolved = strategy.resolve(s, world_size=mp_degree, policy="warn")
    else:
        resolved = strategy.resolve(s, world_size=mp_degree)
    expect_async = mp_degree > 1 and f5
    assert resolved.mp.async_allreduce == expect_async
    assert resolved.mp.skip_c_identity == (expect_async and f6)
    assert resolved.mp.fused_linear_param_grad_add == (expect_async and f7)
    gated = sum(flag and not eff for flag, eff in [
        (f5, resolved.mp.async_allreduce), (f6, resolved.mp.skip_c_identity), (f7, resolved.mp.fused_linear_param_grad_add)])
    assert len([n for n in resolved.notes if "has no effect" in n]) == gated


def test_flags_with_mp_degree_1_are_noted():
    resolved = strategy.resolve(make(1, dp_degree=1, mp_async_allreduce=True), world_size=1)
    assert resolved.notes == ("hybrid_configs.mp_configs.mp_async_allreduce is set but has no effect: hybrid_configs.mp_degree is 1.",)


def test_dp_degree_is_inferred_from_the_world_size():
    resolved = strategy.resolve(make(2), world_size=8)
    assert (resolved.dp_degree, resolved.mp_degree, resolved.world_size) == (4, 2, 8)
    assert resolved.notes == ("hybrid_configs.dp_degree inferred as 4 from world size 8.",)


def test_world_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "6")
    assert strategy.resolve(make(2)).dp_degree == 3
    monkeypatch.setenv("WORLD_SIZE", "six")
    with pytest.raises(StrategyError, match="WORLD_SIZE='six' is not an integer"):
        strategy.resolve(make(2))


def test_without_a_world_size_inferred_dp_is_1_and_noted(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    resolved = strategy.resolve(make(2))
    assert resolved.dp_degree == 1
    assert "dp_degree is -1 (infer) and no world size was given" in resolved.notes[0]


def test_product_mismatch_names_every_degree():
    with pytest.raises(StrategyError) as info:
        strategy.resolve(make(2, dp_degree=2), world_size=8)
    assert str(info.value) == (
        "the degrees dp_degree=2 × mp_degree=2 × pp_degree=1 × sharding_degree=1 × sep_degree=1 × cp_degree=1 multiply to 4, "
        "but the world size is 8; make their product 8, or set dp_degree: -1 to infer it"
    )


def test_world_size_not_divisible_cannot_infer_dp():
    with pytest.raises(StrategyError, match="cannot infer dp_degree: world size 3 is not divisible"):
        strategy.resolve(make(2), world_size=3)


def test_resolved_is_frozen():
    resolved = strategy.resolve(make(2), world_size=2)
    with pytest.raises(AttributeError):
        resolved.mp_degree = 4  # type: ignore[misc]


def test_programmatic_values_are_checked_too():
    s = make(2)
    s.hybrid_configs.mp_configs.sync_mode = "avg"
    with pytest.raises(StrategyError, match='sync_mode must be one of "broadcast", "average"'):
        strategy.resolve(s, world_size=2)


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ("Flags_mp_aysnc_allreduce", "mp_async_allreduce"),
        ("Flags_skip_mp_c_identity", "mp_skip_c_identity"),
        ("Flags_fused_linear_param_grad_add", "mp_fused_linear_param_grad_add"),
    ],
)
def test_legacy_environment_variable_warns_and_names_the_field(monkeypatch, env, field):
    monkeypatch.setenv(env, "1")
    with pytest.warns(strategy.StrategyWarning, match=f"{env} is no longer read; set hybrid_configs.mp_configs.{field}: true"):
        resolved = strategy.resolve(make(2), world_size=2)
    assert not resolved.mp.async_allreduce  # the variable is not read


def test_nccl_config_resolves_per_group_and_notes_what_torch_cannot_set():
    s = strategy.loads('hybrid_configs { mp_degree: 2 mp_configs { nccl_config { commName: "tp" nchannels: 4 algoStr: "Ring" } }'
                       ' dp_configs { nccl_config { commName: "dp" } } }')
    r = strategy.resolve(s, world_size=4)
    assert r.nccl == {"mp": {"commName": "tp", "nchannels": 4}, "dp": {"commName": "dp"}}
    assert any(n.startswith("hybrid_configs.mp_configs.nccl_config.algoStr is set but has no effect in PyTorch: torch's NCCL")
               for n in r.notes)
    assert ("hybrid_configs.mp_configs.nccl_config (commName, nchannels) applies to the mp group's NCCL communicator; "
            "it has no effect on gloo.") in r.notes


def test_nccl_config_of_an_inactive_mp_group_is_noted_not_applied():
    s = strategy.loads('hybrid_configs { mp_degree: 1 mp_configs { nccl_config { commName: "tp" } } }')
    r = strategy.resolve(s, world_size=1)
    assert r.nccl == {}


def test_a_not_implemented_setting_left_at_its_default_or_unset_never_errors():
    s = strategy.loads("amp: false hybrid_configs { pp_degree: 1 sharding_degree: 1 ep_degree: 1 } amp_configs { use_pure_bf16: true }")
    r = strategy.resolve(s, world_size=1)  # amp_configs only matters with amp: true
    assert "amp_configs.use_pure_bf16 is set but has no effect: amp is false." in r.notes


def test_unknown_names_stay_errors_and_suggest_only_names_at_that_level():
    with pytest.raises(strategy.StrategyError, match=r"unknown field hybrid_configs.mp_configs.sp_async_reduce_scater; "
                                                     r"did you mean 'sp_async_reduce_scatter'\?"):
        strategy.loads("hybrid_configs { mp_configs { sp_async_reduce_scater: true } }")
    with pytest.raises(strategy.StrategyError) as caught:
        strategy.loads("hybrid_configs { ampp: true }")  # `amp` exists, but one level up
    assert "did you mean" not in str(caught.value) and "valid names: dp_degree" in str(caught.value)


def test_explain_lists_every_set_field_with_its_status():
    s = strategy.loads("a_sync: true localsgd: true hybrid_configs { mp_degree: 2 pp_configs { delay_scale_loss: true } }")
    text = strategy.explain(s, world_size=2, all_fields=True)
    rows = explain_rows(text)
    assert rows["localsgd"] == ["true", "set", "not implemented: torch offers it as PostLocalSGDOptimizer (torch.distributed.optim)"]
    assert rows["a_sync"][:2] == ["true", "set"] and rows["a_sync"][2].startswith("no effect in PyTorch: parameter-server")
    assert rows["hybrid_configs.pp_configs.delay_scale_loss"] == ["true", "set", "no effect: hybrid_configs.pp_degree is 1"]
    assert rows["hybrid_configs.mp_configs.need_broadcast_data"] == ["true", "default", "on"]
    assert "dgc" not in rows  # defaults of what is not implemented are left out


def test_a_loaded_strategy_changed_in_code_is_checked_again_when_resolved(write):
    s = strategy.load(write("a.prototxt", "hybrid_configs { mp_degree: 2 }\n"))
    s.hybrid_configs.mp_configs.mp_skip_c_identity = True  # breaks `requires` after the load checked it
    with pytest.raises(StrategyError, match="mp_skip_c_identity requires hybrid_configs.mp_configs.mp_async_allreduce"):
        strategy.resolve(s, world_size=2)


def test_a_strategy_loaded_under_warn_is_held_to_strict_rules_when_resolved_strictly(write):
    with pytest.warns(strategy.StrategyWarning):
        s = strategy.load(write("a.prototxt", "hybrid_configs { mp_degree: 2 mp_configs { mp_skip_c_identity: true } }\n"),
                          policy="warn")
    with pytest.raises(StrategyError, match=r"a.prototxt:1:44: hybrid_configs.mp_configs.mp_skip_c_identity requires"):
        strategy.resolve(s, world_size=2)


@pytest.mark.parametrize(("text", "message"), [
    ("hybrid_configs { mp_degree: 2dp_degree: 1 }", "<string>:1:29: invalid number 2dp_degree"),
    ("amp_configs { init_loss_scaling: 1" + "0" * 330 + " }", "is out of range for a floating-point number"),
    ('hybrid_configs { mp_configs { tp_plan { pattern: "x" style: "COLWISE" } } }', "got the string 'COLWISE'"),
    ('hybrid_configs { mp_configs { tp_plan {\n  pattern: "x"\n} } }', "<string>:1:31: hybrid_configs.mp_configs.tp_plan[0] needs style"),
])
def test_text_format_mistakes_protobuf_rejects_are_located_errors(text, message):
    with pytest.raises(StrategyError) as caught:
        strategy.loads(text)
    assert message in str(caught.value)


def test_quoted_and_yaml_floats_read_as_protobufs_json_mapping_does():
    assert strategy.loads("amp_configs: {decr_ratio: 5e-1}", format="yaml").amp_configs.decr_ratio == 0.5
    assert strategy.loads('{"amp_configs": {"init_loss_scaling": "1024.5"}}', format="json").amp_configs.init_loss_scaling == 1024.5


def test_resolved_floats_are_spelled_as_the_file_spells_them():
    assert strategy.resolve(strategy.loads("amp: true"), world_size=1).amp.decr_ratio == 0.8


def test_every_mp_setting_of_an_inactive_mp_group_is_noted_and_its_plan_applies_nowhere():
    s = strategy.loads('hybrid_configs { mp_degree: 1 mp_configs { sync_mode: "average" nccl_config { commName: "tp" } '
                       'tp_plan { pattern: "a" style: COLWISE } } }')
    r = strategy.resolve(s, world_size=1)
    assert r.tp_plan == () and r.nccl == {}
    assert "hybrid_configs.mp_configs.nccl_config.commName is set but has no effect: hybrid_configs.mp_degree is 1." in r.notes
    assert "hybrid_configs.mp_configs.sync_mode is set but has no effect: hybrid_configs.mp_degree is 1." in r.notes


def test_positions_survive_other_loads_while_the_message_is_used():
    from strategy.schema import support

    s = strategy.loads("hybrid_configs {\n sharding_degree: 2\n sharding_configs { offload_opt_buffer_size: 8 }\n}")
    for _ in range(40):
        strategy.loads("")
        support_recall = support.recall(s)  # using it keeps it
    assert support_recall.positions
    with pytest.raises(StrategyError, match=r"^<string>:3:21: hybrid_configs.sharding_configs.offload_opt_buffer_size = 8 is not implemented"):
        strategy.resolve(s, world_size=2)


def test_recompute_without_checkpoints_recomputes_every_block_and_says_so():
    r = strategy.resolve(strategy.loads("recompute: true"), world_size=1)
    assert r.recompute == strategy.RecomputeSettings(enabled=True, checkpoints=())
    assert ("recompute is on and recompute_configs.checkpoints names no modules: every block of the model is recomputed "
            "(Hugging Face's _no_split_modules classes, else the children of its largest ModuleList), as Paddle "
            "recomputes every decoder layer.") in r.notes
    named = strategy.resolve(strategy.loads('recompute: true recompute_configs { checkpoints: "model.layers.*" }'), world_size=1)
    assert not any("names no modules" in n for n in named.notes)


def test_each_ncclconfig_names_its_group_for_resolved_nccl():
    groups = {path: value for path, _, value in strategy.schema.fields_with("group")}
    assert groups == {
        "hybrid_configs.mp_configs.nccl_config": "mp",
        "hybrid_configs.pp_configs.coll_nccl_config": "pp",
        "hybrid_configs.pp_configs.p2p_nccl_config": "pp_p2p",
        "hybrid_configs.sharding_configs.nccl_config": "sharding",
        "hybrid_configs.dp_configs.nccl_config": "dp",
        "hybrid_configs.sep_configs.nccl_config": "sep",
        "hybrid_configs.cp_configs.nccl_config": "cp",
        "hybrid_configs.ep_configs.nccl_config": "ep",
        "hybrid_configs.moe_sharding_configs.nccl_config": "moe_sharding",
    }


def test_nccl_config_of_an_axis_of_degree_1_is_noted_not_applied():
    s = strategy.loads('hybrid_configs { sep_configs { nccl_config { commName: "sep" } } '
                       'pp_configs { p2p_nccl_config { commName: "p2p" } } }')
    r = strategy.resolve(s, world_size=1)
    assert r.nccl == {}
    assert "hybrid_configs.sep_configs.nccl_config.commName is set but has no effect: hybrid_configs.sep_degree is 1." in r.notes
    assert "hybrid_configs.pp_configs.p2p_nccl_config.commName is set but has no effect: hybrid_configs.pp_degree is 1." in r.notes


def _descriptors(desc, seen):
    if desc not in seen:
        seen.add(desc)
        for f in desc.fields:
            if f.message_type is not None:
                _descriptors(f.message_type, seen)
    return seen


@settings(max_examples=examples(200), deadline=None)
@given(messages())
def test_the_review_asking_only_loud_fields_says_what_the_full_walk_says(msg):
    """An active, implemented message of a type with few fields that can say anything is asked only for those."""
    from strategy.schema import support

    def said(review):
        return review.notes, review.effects, [(f.path, str(f.error)) for f in review.unsupported]

    shortcut = said(support.review(msg))
    saved = dict(support._LOUD)
    support._LOUD.update(dict.fromkeys(_descriptors(msg.DESCRIPTOR, set()), None))  # None: list every set field
    try:
        assert said(support.review(msg)) == shortcut
    finally:
        support._LOUD.clear()
        support._LOUD.update(saved)


@settings(max_examples=examples(100), deadline=None)
@given(messages())
def test_the_fast_built_result_is_the_one_its_constructor_builds(msg):
    """resolve fills Resolved's dict at once and shares settings of equal values: the same object __init__ gives,
    a dict of its own, equal again after pickling and after resolving the same strategy again."""
    import dataclasses
    import pickle
    import warnings

    from strategy.resolution.resolver import resolve_with_reasons

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", strategy.StrategyWarning)
        try:
            first, reasons = resolve_with_reasons(msg, world_size=None, policy="warn")
            again, reasons_again = resolve_with_reasons(msg, world_size=None, policy="warn")
        except StrategyError:
            return
    built = strategy.Resolved(**{f.name: getattr(first, f.name) for f in dataclasses.fields(first)})
    assert built == first == again and reasons == reasons_again
    assert pickle.loads(pickle.dumps(first)) == first
    assert first.nccl is not again.nccl


@pytest.mark.parametrize("degree", [1, 2])
def test_configs_left_out_resolve_as_empty_configs(degree):
    """The settings built once for a group whose configs a file leaves out are those of an empty configs message."""
    degrees = f"mp_degree: {degree} sharding_degree: {3 - degree}"
    base = f"amp: true\nrecompute: true\nhybrid_configs {{ {degrees} }}\n"
    empty = f"amp: true\nrecompute: true\nhybrid_configs {{ {degrees} mp_configs {{}} sharding_configs {{}} }}\namp_configs {{}}\nrecompute_configs {{}}\n"
    left_out, given = strategy.resolve(strategy.loads(base)), strategy.resolve(strategy.loads(empty))
    assert (left_out.mp, left_out.sharding, left_out.amp, left_out.recompute) == (given.mp, given.sharding, given.amp, given.recompute)
