"""A model's blocks: one notion shared by recompute, sharding units and pipeline cuts."""

from __future__ import annotations

from torch import nn

from parallel.blocks import block_names, largest_module_list
from hf_models import hf_model


def test_hugging_face_blocks_are_its_no_split_module_classes():
    model = hf_model("llama")
    assert block_names(model) == ["model.layers.0", "model.layers.1"]


def test_without_no_split_modules_the_blocks_are_the_largest_module_list():
    model = nn.Module()
    model.heads = nn.ModuleList([nn.Linear(2, 2)])
    model.trunk = nn.Sequential(nn.Linear(2, 2), nn.ModuleList([nn.Linear(2, 2) for _ in range(3)]))
    assert block_names(model) == ["trunk.1.0", "trunk.1.1", "trunk.1.2"]
    name, layers = largest_module_list(model)
    assert name == "trunk.1" and len(layers) == 3


def test_a_root_module_list_names_its_blocks_by_index():
    assert block_names(nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])) == ["0", "1"]


def test_blocks_nested_in_a_block_are_not_blocks_of_their_own():
    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

    class Inner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2)

    model = nn.Module()
    model.layers = nn.ModuleList([Outer(), Outer()])
    model._no_split_modules = ["Outer", "Inner"]
    assert block_names(model) == ["layers.0", "layers.1"]


def test_a_model_with_neither_marker_has_no_blocks():
    assert block_names(nn.Sequential(nn.Linear(2, 2), nn.ReLU())) == []
