"""The rank side of `strategy tune`: the device probe and the trial runner, each run under the launcher (torchrun)."""
