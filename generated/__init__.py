"""Code compiled from proto/distributed_strategy.proto by `make proto`; do not edit.

Installed as `strategy._generated`; `make proto-check` fails when it is stale.
"""
