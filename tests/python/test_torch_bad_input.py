"""Bad input to mmbal.torch raises mmbal.Error naming the value, on the rank that has it,
before any collective.

Why most cases make EVERY rank bad: a rank that raises before a collective leaves the good
ranks waiting inside it; with every rank bad, nobody enters the collective, and a valid
exchange right after proves that no collective was started (the ranks are still in step).
`test_one_bad_rank_times_out_the_others` shows the one-bad-rank case with a process group
timeout: the bad rank raises mmbal.Error, the others get the backend's timeout, nobody hangs.
Exceptions: `StepBalancer.plan` and `gather_metadata` take part in their gather even with bad
metadata (with a failure mark), so one bad rank raises on every rank
(tests/python/test_torch_prefetch.py); here, with every rank bad, they stay in step too."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mmbal  # noqa: E402
import mmbal.torch as mt  # noqa: E402
import torch_harness  # noqa: E402


def simple_plan(rank, ranks, plan_rank=None, plan_ranks=None):
    """Item i of 2 rows on rank i % ranks moves to rank (i + 1) % ranks."""
    pr = ranks if plan_ranks is None else plan_ranks
    n = 2 * pr
    source = np.arange(n) % pr
    target = mmbal.Assignment(((np.arange(n) + 1) % pr).astype(np.int32), (np.arange(n) // pr).astype(np.int32), pr)
    return mmbal.alltoall_plan(source, target, np.full(n, 2), rank if plan_rank is None else plan_rank)


def still_in_step(rank, ranks):
    plan = simple_plan(rank, ranks)
    y = mt.exchange(torch.full((4, 1), float(rank)), plan)
    assert y.view(-1).tolist() == [float((rank - 1) % ranks)] * 4


def bad_exchange_worker(rank, ranks):
    plan = simple_plan(rank, ranks)
    cases = [
        (lambda: mt.exchange(torch.zeros(5, 3), plan), r"x has 5 rows \(dim 0\) but the plan expects source_rows = 4"),
        (lambda: mt.exchange(torch.zeros(4), simple_plan(rank, ranks, plan_rank=(rank + 1) % ranks)), rf"plan.rank = {(rank + 1) % ranks} but this process is rank {rank}"),
        (lambda: mt.exchange(torch.zeros(4), simple_plan(0, ranks, plan_rank=0, plan_ranks=3)), "plan.ranks = 3 but the group has 4 ranks"),
        (lambda: mt.exchange(torch.tensor(1.0), plan), "0-d tensor"),
        (lambda: mt.exchange(np.zeros(4), plan), "must be a torch.Tensor, got ndarray"),
        (lambda: mt.exchange(torch.zeros(4), mmbal.Assignment(np.zeros(1, np.int32), np.zeros(1, np.int32), ranks)), "has no attribute"),
        (lambda: mt.exchange(torch.zeros(4, dtype=torch.complex64), plan), "complex"),
    ]
    for call, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            call()
        still_in_step(rank, ranks)
    return len(cases)


def test_bad_exchange_raises_before_the_collective():
    assert torch_harness.run(bad_exchange_worker, 4) == [7] * 4


def bad_metadata_worker(rank, ranks):
    good = dict(samples=2, segment_sample=[0, 1], segment_modality=[0, 1], segment_tokens=[3, 4], segment_encoder_len=[0, 8])
    cases = [
        (dict(segment_tokens=torch.tensor([3.0, 4.0])), "segment_tokens must be an integer tensor, got dtype torch.float32"),
        (dict(segment_tokens=np.array([3.5, 4.0])), "segment_tokens must hold integers, got dtype float64"),
        (dict(segment_encoder_len=[0, -8]), r"segment_encoder_len\[1\] = -8 is negative"),
        (dict(segment_sample=[1, 0]), r"segment_sample\[1\] = 0 decreases"),
        (dict(segment_sample=[0, 2]), r"segment_sample\[1\] = 2 >= samples = 2"),
        (dict(segment_modality=[0]), "segment_modality has 1 entries but segment_sample has 2"),
        (dict(segment_tokens=[[3, 4]]), "must be 1-D"),
        (dict(samples=-1), r"samples = -1 is out of range \[0, 4294967295\]"),
        (dict(samples=2.0), "samples must be an int"),
        (dict(segment_modality=[0, 300]), "id 300 > 255"),
    ]
    for change, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            mt.LocalMetadata(**{**good, **change})
    balancer = mt.StepBalancer(modalities=("text", "image"))
    with pytest.raises(mmbal.Error, match="segment_modality id 2 has no name"):
        balancer.plan(mt.LocalMetadata(**{**good, "segment_modality": [0, 2]}))
    with pytest.raises(mmbal.Error, match="must be a LocalMetadata"):
        mt.gather_metadata({"samples": 1})
    with pytest.raises(mmbal.Error, match="modalities\\[0\\] must be 'text'"):
        mt.StepBalancer(modalities=("image",))
    with pytest.raises(mmbal.Error, match="policies names phase 'audio'"):
        mt.StepBalancer(modalities=("text", "image"), policies={"audio": ("tokens", "lpt")})
    with pytest.raises(mmbal.Error, match="engine = 'fast'"):
        mt.StepBalancer(engine="fast")
    with pytest.raises(mmbal.Error):  # the orchestrator rejects a spec that does not parse
        mt.StepBalancer(modalities=("text", "image"), policies={"image": ("tokens:oops=1", "lpt")})
    # still in step: a good plan works, and its moves check sizes
    plan = balancer.plan(mt.LocalMetadata(**good))
    with pytest.raises(mmbal.Error, match="sizes has 3 entries but the phase has 8 items"):
        plan.move_samples(torch.zeros(1), sizes=[1, 1, 1])
    with pytest.raises(mmbal.Error, match="no encoder phase 'audio'"):
        plan.encoder_plan("audio")
    with pytest.raises(mmbal.Error, match="x has 3 rows"):
        plan.move_samples(torch.zeros(3), sizes=np.ones(plan.meta.samples, np.int64))
    still_in_step(rank, ranks)
    return True


def test_bad_metadata_raises_before_the_gather():
    assert torch_harness.run(bad_metadata_worker, 4) == [True] * 4


def one_bad_rank_worker(rank, ranks):
    plan = simple_plan(rank, ranks)
    rows = 5 if rank == 1 else 4
    try:
        mt.exchange(torch.zeros(rows), plan)
    except mmbal.Error as e:
        return ("mmbal.Error", str(e))
    except RuntimeError as e:  # the backend's timeout on the good ranks
        return ("RuntimeError", str(e))
    return ("no error", "")


def test_one_bad_rank_times_out_the_others():
    out = torch_harness.run(one_bad_rank_worker, 4, timeout_s=4)
    assert out[1][0] == "mmbal.Error" and "x has 5 rows" in out[1][1]
    for r in (0, 2, 3):
        assert out[r][0] == "RuntimeError", out[r]


def checked_exchange_worker(rank, ranks):
    """exchange(check=True): one rank's bad input raises mmbal.Error on EVERY rank (no hang,
    no abort, no reinterpreted bytes), and the ranks stay in step."""
    plan = simple_plan(rank, ranks)
    ok = torch.full((4, 2), float(rank))
    cases = [
        # dtype of another width on rank 1: gloo would abort the process
        (torch.zeros(4, 2, dtype=torch.float64) if rank == 1 else ok, r"rank 1 passes rows of \(dtype code, dims, row size\) = \[1, 2, 2\] but rank 0 passes \[0, 2, 2\]"),
        # same width, other dtype: gloo would reinterpret the bytes silently
        (torch.zeros(4, 2, dtype=torch.int32) if rank == 1 else ok, "rank 1 passes rows of"),
        # same elements per row, another row shape
        (torch.zeros(4, 1, 2) if rank == 1 else ok, "rank 1 passes rows of"),
        # wrong row count on rank 1: its own message there, the rank named elsewhere
        (torch.zeros(5, 2) if rank == 1 else ok, "x has 5 rows" if rank == 1 else "rank 1 refused its input"),
    ]
    for x, message in cases:
        with pytest.raises(mmbal.Error, match=message):
            mt.exchange(x, plan, check=True)
        still_in_step(rank, ranks)
    # another global plan on rank 1 (other sizes): its splits would not match (uninitialized
    # rows or an abort before)
    target = mmbal.Assignment(((np.arange(2 * ranks) + 1) % ranks).astype(np.int32), (np.arange(2 * ranks) // ranks).astype(np.int32), ranks)
    sizes = np.full(2 * ranks, 2)
    if rank == 1:
        sizes[-1] = 1
    other = mmbal.alltoall_plan(np.arange(2 * ranks) % ranks, target, sizes, rank)
    x = torch.zeros(other.source_rows, 2)
    with pytest.raises(mmbal.Error, match="rank 1 holds another global plan than rank 0"):
        mt.exchange(x, other, check=True)
    still_in_step(rank, ranks)
    with pytest.raises(mmbal.Error, match="check: expected True or False, got 'no'"):
        mt.exchange(ok, plan, check="no")
    y = mt.exchange(ok, plan, check=True)
    assert y.view(-1).tolist() == [float((rank - 1) % ranks)] * 8
    # StepBalancer(verify=True) compares the metadata capacities before the gather
    balancer = mt.StepBalancer(modalities=("text", "image"), metadata_capacity=64 if rank == 0 else 1024, verify=True)
    local = mt.LocalMetadata(1, [0], [0], [3], [0])
    with pytest.raises(mmbal.Error, match=r"metadata capacities differ \(\[64, 1024, 1024, 1024\]\)"):
        balancer.plan(local)
    balancer = mt.StepBalancer(modalities=("text", "image"), verify=True)
    plan = balancer.plan(local)
    assert plan.check and plan.move_samples(torch.zeros(3)).shape == (int(plan.llm.lengths[plan.llm_samples()].sum()),)
    with pytest.raises(mmbal.Error, match="no phase 'image'"):
        plan.loads("image")
    with pytest.raises(mmbal.Error, match=r"rank = 4 not in \[0, 4\)"):
        plan.llm_samples(rank=4)
    with pytest.raises(mmbal.Error, match=r"rank = -1 not in \[0, 4\)"):
        plan.llm_samples(rank=-1)
    with pytest.raises(mmbal.Error, match="modality 'bogus' is not one of"):
        plan.local_segments("bogus")
    with pytest.raises(mmbal.Error, match=r"plan_global: rank = 5 not in \[0, 4\)"):
        balancer.plan_global(plan.meta, 5)
    return True


def test_checked_exchange_fails_on_every_rank():
    assert torch_harness.run(checked_exchange_worker, 4) == [True] * 4


def test_local_checks_without_a_process_group():
    where = "LocalMetadata.from_samples: sample 0, segment 1"
    for segment, message in [
        ((1, 3.7, 5), f"{where}: tokens = 3.7 must be an integer"),
        (("image", 3, 5), f"{where}: modality = 'image' must be an integer"),
        ((1, 3, True), f"{where}: encoder_len = True must be an integer"),
        ((1, 2**64, 5), f"{where}: tokens = 18446744073709551616 is out of range"),
        ((1, -3, 5), f"{where}: tokens = -3 is out of range"),
        (torch.tensor([1.0, 3.5, 5.0]), f"{where}: modality = tensor\\(1.\\) must be an integer"),
        (7, "sample 0 has segment 1 = 7; need"),
    ]:
        with pytest.raises(mmbal.Error, match=message):
            mt.LocalMetadata.from_samples([[(0, 2, 0), segment]])
    meta = mt.LocalMetadata.from_samples([[(0, 2, 0), (np.int64(1), torch.tensor(3), np.uint8(5))]])
    assert meta.segment_tokens.tolist() == [2, 3] and meta.segment_encoder_len.tolist() == [0, 5]
    with pytest.raises(mmbal.Error, match=r"samples = 4294967296 is out of range \[0, 4294967295\]"):
        mt.LocalMetadata(2**32, [], [], [], [])
    with pytest.raises(mmbal.Error, match="1 costs for 3 groups"):
        mt.deal_groups([[0], [1], [2]], 2, [1.0])
    with pytest.raises(mmbal.Error, match="5 costs for 3 groups"):
        mt.deal_groups([[0], [1], [2]], 2, [1, 2, 3, 4, 5])
    with pytest.raises(mmbal.Error, match="ranks = 2.0 must be an integer"):
        mt.deal_groups([[0, 1, 2]], 2.0, [1.0])
    with pytest.raises(mmbal.Error, match="costs must be numbers"):
        mt.deal_groups([[0], [1], [2]], 2, None)
    with pytest.raises(mmbal.Error, match="costs must be finite, got nan"):
        mt.deal_groups([[0], [1]], 2, [1.0, float("nan")])
    with pytest.raises(mmbal.Error, match="initial_capacity = 'x' must be an integer"):
        mt.MetadataGatherer(initial_capacity="x")
