"""Reading a Megatron launcher without running it: assignments, defaults, expansion, arrays, last flag wins."""

from __future__ import annotations

import pytest

import strategy
from strategy.importers import import_config
from strategy.importers.common import Unexpanded
from strategy.importers.launcher import flags


def entry_value(imported, key):
    return next(e.value for e in imported.entries if e.key == key)


def values(script: str) -> dict[str, object]:
    return {f.name: f.value for f in flags(script, "train.sh")}


def test_assignments_are_followed_and_expanded_in_values():
    assert values("TP=4\nPP=${PP:-2}\ntorchrun x.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size ${PP}\n") \
        == {"tensor-model-parallel-size": "4", "pipeline-model-parallel-size": "2"}


def test_a_default_is_used_only_when_the_variable_is_unset():
    assert values('NNODES=${SLURM_NNODES:-"1"}\nA=3\nB=${A:-9}\nrun --nnodes $NNODES --x $B\n') == {"nnodes": "1", "x": "3"}


def test_array_elements_and_quoted_flag_value_pairs():
    script = 'ARGS=(\n    --bf16\n    --fp8-format hybrid  # a comment\n)\nARGS+=("--split \'99,1,0\'" "--data-path $D")\n'
    assert values("D=/data\n" + script) == {"bf16": True, "fp8-format": "hybrid", "split": "99,1,0", "data-path": "/data"}


def test_flags_inside_a_string_assignment_count():
    assert values('GPT_ARGS="--num-layers 24 \\\n    --hidden-size $H"\nH=1024\n') == {
        "num-layers": "24", "hidden-size": Unexpanded("$H", "$H is not set in the script (it comes from the environment)")}


def test_the_last_flag_wins_in_one_entry_at_its_first_place(write):
    imported = import_config(write("t.sh", "run --tensor-model-parallel-size 2 --bf16 --tensor-model-parallel-size 4\n"))
    assert [(e.key, e.value) for e in imported.entries] == [("tensor-model-parallel-size", "4"), ("bf16", True)]
    assert imported.strategy.hybrid_configs.mp_degree == 4


def test_flag_equals_value_and_arithmetic():
    assert values("N=2\nG=8\nrun --nnodes=$N --nproc_per_node $((G*N/2))\n") == {"nnodes": "2", "nproc_per_node": "8"}


def test_arithmetic_divides_as_bash_does_truncating_toward_zero():
    # bash: $((-7/2)) is -3 and $((-7%2)) is -1 (C's division), where Python's // and % give -4 and 1
    assert values("N=-7\nrun --a $((N/2)) --b $((-7/2)) --c $((7/-2)) --d $((7/2)) --e $((N%2)) --f $((7%-2))\n") == {
        "a": "-3", "b": "-3", "c": "-3", "d": "3", "e": "-1", "f": "1"}


def test_what_only_a_run_knows_is_unresolved_with_the_reason(write):
    imported = import_config(write("t.sh", 'CKPT=$1\nOUT="$(date)"\nrun --tensor-model-parallel-size 2 --save $CKPT '
                                           "--log-interval $OUT --tensorboard-dir $OUT --data-cache-path $HOME/cache\n"))
    reasons = {e.key: (e.status, e.reason) for e in imported.entries}
    assert entry_value(imported, "save") == "$CKPT"
    assert reasons["save"] == ("unresolved", "$1 is an argument of the script, known only when it runs")
    assert reasons["log-interval"] == ("unresolved", "$(date) is a command's output, known only when the script runs")
    assert reasons["tensorboard-dir"][0] == "mapped"  # given at all, TensorBoard is on, whatever its folder
    assert reasons["data-cache-path"] == ("unresolved", "$HOME is not set in the script (it comes from the environment)")


def test_comments_and_single_dash_options_are_not_flags():
    assert values("# --pipeline-model-parallel-size 4\nmkdir -p out  # --bf16\nrun --micro-batch-size 1 \\\n  --fp16\n") \
        == {"micro-batch-size": "1", "fp16": True}


def test_a_bare_flag_before_the_program_does_not_take_it_as_a_value():
    assert values("torchrun --standalone pretrain_gpt.py --sequence-parallel --lr 1e-4\n") == {
        "standalone": True, "sequence-parallel": True, "lr": "1e-4"}


def test_an_unterminated_quote_is_a_located_error(write):
    with pytest.raises(strategy.StrategyError) as e:
        import_config(write("t.sh", 'run --tensor-model-parallel-size 2\nX="open\n'))
    assert (e.value.line, e.value.column) == (2, 3) and "unterminated" in e.value.message
