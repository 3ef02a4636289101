"""The transformers releases `parallelize` supports: Hugging Face models are driven through transformers' internals
(the causal mask, AttentionInterface, plans), which move between releases, so others are refused before any change.
"""

from __future__ import annotations

import sys

from torch import nn

__all__ = ["SUPPORTED", "check_transformers"]

# The oldest and newest releases `make test-transformers` runs the Hugging Face tests on; pyproject.toml's hf extra
# states the same range (a test checks). 5.9 is the first with today's create_causal_mask (no cache_position);
# 5.24 renamed its past_key_values to cache; 5.25 could not be tested (it needs kernels >= 0.19.1, which the
# package index here lacks).
SUPPORTED = ">=5.9,<5.25"
OLDEST, NEWEST = "5.9.0", "5.24.0"


def check_transformers(model: nn.Module) -> None:
    """Raise when `model` is a transformers model and the installed transformers is outside `SUPPORTED`.

    Raises:
        RuntimeError: naming the installed release, the supported range and the pip command that fits.
    """
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(model, transformers.PreTrainedModel):
        return
    from packaging.specifiers import SpecifierSet  # a dependency of transformers

    installed = transformers.__version__
    if not SpecifierSet(SUPPORTED).contains(installed, prereleases=True):
        raise RuntimeError(
            f"parallelize({type(model).__name__}): transformers {installed} is installed, but Hugging Face models are "
            f"supported with transformers{SUPPORTED} (tested on {OLDEST} and {NEWEST}): their masks, attention and "
            f"plans are reached through transformers' internals, which change between releases; pip install "
            f"'transformers{SUPPORTED}'")
