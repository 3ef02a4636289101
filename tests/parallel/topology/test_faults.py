"""Faults with real processes: a rank that dies mid-step makes the others fail with a clear error within
the configured timeout; an interrupted write never leaves a truncated or temporary file."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import pytest

import strategy
from distributed import free_port, rank_env

CTX = mp.get_context("spawn")


def _dies_mid_step(rank: int, port: int, results, hang: bool = False, timeout: float = 15) -> None:
    os.environ.update(rank_env(rank, 2, port))
    import torch

    import parallel
    from rank_helpers import make_strategy

    torch.set_num_threads(1)
    parallel.init(make_strategy(2, flags=(True, False, False)), timeout=timeout)
    layer = parallel.ColumnParallelLinear(8, 8)
    y = layer(torch.randn(4, 8, requires_grad=True))  # the backward all-reduces dx
    if rank == 1:
        if hang:
            time.sleep(timeout + 30)  # alive but stuck: never reaches the backward's all-reduce
        os._exit(3)  # killed between forward and backward
    start = time.monotonic()
    try:
        y.sum().backward()
        results.put(("finished", "", time.monotonic() - start))
    except parallel.CollectiveError as e:
        results.put(("CollectiveError", str(e), time.monotonic() - start))
    except BaseException as e:  # noqa: BLE001
        results.put((type(e).__name__, str(e), time.monotonic() - start))
    results.close()
    results.join_thread()  # flush to the parent before the hard exit
    os._exit(0)


@pytest.mark.timeout(90)
def test_a_rank_dying_mid_step_fails_the_others_within_the_timeout():
    port, results = free_port(), CTX.Queue()
    procs = [CTX.Process(target=_dies_mid_step, args=(r, port, results), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    kind, message, seconds = results.get(timeout=80)
    for p in procs:
        p.join(timeout=10)
    assert kind == "CollectiveError", message
    assert "async dx all-reduce over ranks [0, 1] failed on rank 0" in message
    assert "A peer rank probably died" in message
    assert seconds < 15 + 5


@pytest.mark.timeout(90)
def test_a_stuck_rank_fails_the_others_after_the_configured_timeout():
    port, results = free_port(), CTX.Queue()
    procs = [CTX.Process(target=_dies_mid_step, args=(r, port, results, True, 3), daemon=True) for r in range(2)]
    for p in procs:
        p.start()
    kind, message, seconds = results.get(timeout=80)
    for p in procs:
        p.kill()
    assert kind == "CollectiveError", message
    assert "failed on rank 0" in message
    assert 2 < seconds < 3 + 10  # waited for the 3 s timeout, not forever


def test_an_interrupted_convert_leaves_the_output_untouched(tmp_path, monkeypatch):
    from strategy.cli import main

    src, out = tmp_path / "in.yaml", tmp_path / "out.json"
    src.write_text("hybrid_configs: {mp_degree: 2}\n")
    out.write_text('{"old": true}')

    def interrupted(fd, data):
        os.write(fd, data[:3])  # part of the file, then the process is interrupted
        raise KeyboardInterrupt

    monkeypatch.setattr("strategy.atomic._write_all", interrupted)
    assert main(["convert", str(src), str(out)]) == 130
    assert out.read_text() == '{"old": true}'
    assert src.read_text() == "hybrid_configs: {mp_degree: 2}\n"  # the input is never modified
    assert sorted(os.listdir(tmp_path)) == ["in.yaml", "out.json"]


def test_an_interrupted_fmt_leaves_the_file_whole(tmp_path, monkeypatch):
    from strategy.cli import main

    path = tmp_path / "s.prototxt"
    path.write_text("hybrid_configs {mp_degree:2}\n")

    def interrupted(fd, data):
        os.write(fd, data[:5])
        raise KeyboardInterrupt

    monkeypatch.setattr("strategy.atomic._write_all", interrupted)
    assert main(["fmt", str(path)]) == 130
    assert path.read_text() == "hybrid_configs {mp_degree:2}\n"
    assert os.listdir(tmp_path) == ["s.prototxt"]


def test_an_interrupted_dump_leaves_no_debris(tmp_path, monkeypatch):
    def interrupted(fd, data):
        raise KeyboardInterrupt

    monkeypatch.setattr("strategy.atomic._write_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        strategy.dump(strategy.loads("hybrid_configs { mp_degree: 2 }"), tmp_path / "s.pb")
    assert os.listdir(tmp_path) == []
