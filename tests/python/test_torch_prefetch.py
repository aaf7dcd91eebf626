"""mmbal.torch.PrefetchingBalancer on gloo processes: step k+1 is gathered and planned on a
thread (on a process group of its own) while step k moves real tensors on the default group.

Properties: every prefetched plan equals the plan made inline from the same metadata (same
fingerprint, same rank on every rank), steps arrive in order, every moved row arrives where
its plan says; an exception of one rank's source is raised on every rank at that step (no
rank waits for it); a stream that ends on some ranks only raises on every rank; `stop` returns
after exactly `taken + depth` source calls on every rank, whoever stops first."""

import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

import mmbal  # noqa: E402
import mmbal.torch as mt  # noqa: E402
import torch_harness  # noqa: E402

MODALITIES = ("text", "image", "audio")


def step_metadata(rank: int, step: int) -> mt.LocalMetadata:
    """A few samples of text with images and audio; different on every rank and step."""
    rng = np.random.default_rng(1000 * step + rank)
    samples = []
    for _ in range(int(rng.integers(1, 9))):
        segments = [(0, int(rng.integers(1, 400)), 0)]
        for _ in range(int(rng.integers(0, 3))):
            modality = int(rng.integers(1, 3))
            encoder_len = int(rng.integers(16, 2000))
            segments.append((modality, encoder_len // 4 + 1, encoder_len))
        samples.append(segments)
    return mt.LocalMetadata.from_samples(samples)


def counting_source(rank, steps=None, fail_at=None, end_at=None):
    """source(k) for the tests, counting its calls; None after `steps` steps."""
    calls = []

    def source(k):
        calls.append(k)
        time.sleep(0.002)  # a loader's read: the producer and the consumer overlap
        if fail_at is not None and k == fail_at[1] and rank == fail_at[0]:
            raise ValueError(f"rank {rank} could not read step {k}")
        if end_at is not None and k == end_at[1] and rank == end_at[0]:
            return None
        if steps is not None and k >= steps:
            return None
        return step_metadata(rank, k)

    return source, calls


def prefetched_equals_inline_worker(rank, ranks, depth):
    balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.new_group(), threads=1)
    source, calls = counting_source(rank, steps=6)
    seen = []
    with mt.PrefetchingBalancer(balancer, source, depth=depth) as steps:
        for step in steps:
            seen.append((step.index, step.plan.fingerprint))
            plan = step.plan
            # one row per LLM token, holding its global sample id: byte-exact delivery
            local_ids = np.arange(plan.meta.rank_offsets[rank], plan.meta.rank_offsets[rank + 1])
            rows = torch.from_numpy(np.repeat(local_ids, plan.llm.lengths[local_ids]).astype(np.float64))
            moved = plan.move_samples(rows)
            expected = np.repeat(plan.llm_samples(), plan.llm.lengths[plan.llm_samples()])
            assert moved.numpy().tolist() == expected.astype(np.float64).tolist()
            time.sleep(0.005)  # the step's compute, while the producer gathers the next
    assert [k for k, _ in seen] == list(range(6)) and calls == list(range(7))
    inline = mt.StepBalancer(modalities=MODALITIES)
    for k, fingerprint in seen:
        assert inline.plan(step_metadata(rank, k)).fingerprint == fingerprint
    return [f for _, f in seen]


@pytest.mark.parametrize("depth", [1, 2])
def test_prefetched_plans_equal_inline_plans_and_deliver(depth):
    out = torch_harness.run(prefetched_equals_inline_worker, 3, depth)
    assert out[0] == out[1] == out[2] and len(set(out[0])) == 6


def failing_source_worker(rank, ranks):
    balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.new_group())
    source, calls = counting_source(rank, fail_at=(1, 2))
    steps = mt.PrefetchingBalancer(balancer, source)
    got = [steps.next().index, steps.next().index]
    try:
        steps.next()
        raised = ("nothing", "")
    except mmbal.Error as e:  # a ValueError too: first
        raised = ("mmbal.Error", str(e))
    except ValueError as e:
        raised = ("ValueError", str(e))
    after = steps.next()
    steps.stop()
    # still in step: a collective on the default group
    total = torch.tensor([rank])
    dist.all_reduce(total)
    return got, raised, after, calls, int(total)


def test_one_ranks_source_error_is_raised_on_every_rank():
    out = torch_harness.run(failing_source_worker, 3)
    for rank, (got, raised, after, calls, total) in enumerate(out):
        assert got == [0, 1] and after is None and calls == [0, 1, 2] and total == 3
        if rank == 1:
            assert raised == ("ValueError", "rank 1 could not read step 2")
        else:
            assert raised[0] == "mmbal.Error" and "rank(s) [1] raised before the metadata gather" in raised[1], raised


def uneven_end_worker(rank, ranks):
    balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.new_group())
    source, _ = counting_source(rank, end_at=(0, 1))
    with mt.PrefetchingBalancer(balancer, source) as steps:
        assert steps.next().index == 0
        with pytest.raises(mmbal.Error, match=r"the data of rank\(s\) \[0\] ended while the other ranks still have a step"):
            steps.next()
        assert steps.next() is None
    return True


def test_data_ending_on_some_ranks_only_raises_on_every_rank():
    assert torch_harness.run(uneven_end_worker, 3) == [True] * 3


def stop_worker(rank, ranks, depth):
    balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.new_group())
    source, calls = counting_source(rank)  # never ends
    steps = mt.PrefetchingBalancer(balancer, source, depth=depth)
    for _ in range(3):
        steps.next()
    # ranks stop at different times; rank 0 at once, while the others' producers may be in
    # the next gather, which needs rank 0
    time.sleep(0.05 * rank)
    steps.stop()
    steps.stop()  # idempotent
    assert steps.next() is None and steps.stop_requested
    assert not any(t.name == "mmbal-prefetch" for t in threading.enumerate())
    return list(calls)


@pytest.mark.parametrize("depth", [1, 2])
def test_stop_plans_exactly_taken_plus_depth_steps_on_every_rank(depth):
    out = torch_harness.run(stop_worker, 3, depth, timeout_s=30)
    assert out == [list(range(3 + depth))] * 3


def bad_use_worker(rank, ranks):
    own = dist.new_group()
    on_world = mt.StepBalancer(modalities=MODALITIES)
    with pytest.raises(mmbal.Error, match="gathers metadata on its exchange group"):
        mt.PrefetchingBalancer(on_world, lambda k: None)
    with pytest.raises(mmbal.Error, match="gathers metadata on its exchange group"):
        mt.PrefetchingBalancer(mt.StepBalancer(modalities=MODALITIES, metadata_group=dist.group.WORLD), lambda k: None)
    with pytest.raises(mmbal.Error, match="exchange group or the default group"):
        mt.PrefetchingBalancer(mt.StepBalancer(dist.new_group(), modalities=MODALITIES, metadata_group=dist.group.WORLD), lambda k: None)
    balancer = mt.StepBalancer(modalities=MODALITIES, metadata_group=own)
    # while a prefetcher owns the balancer, inline plans (whose gathers would pair up with the
    # producer's, each rank planning with another's metadata) and a second prefetcher raise
    with mt.PrefetchingBalancer(balancer, lambda k: step_metadata(rank, k) if k < 3 else None) as steps:
        with pytest.raises(mmbal.Error, match="belongs to a running PrefetchingBalancer"):
            balancer.plan(step_metadata(rank, 0))
        with pytest.raises(mmbal.Error, match="already belongs to a running PrefetchingBalancer"):
            mt.PrefetchingBalancer(balancer, lambda k: None)
        assert [s.index for s in steps] == [0, 1, 2]
    assert balancer.plan(step_metadata(rank, 0)).fingerprint == mt.StepBalancer(modalities=MODALITIES).plan(step_metadata(rank, 0)).fingerprint
    with pytest.raises(mmbal.Error, match=r"depth = 3 \(must be 1 or 2\)"):
        mt.PrefetchingBalancer(balancer, lambda k: None, depth=3)
    with pytest.raises(mmbal.Error, match="source must be callable"):
        mt.PrefetchingBalancer(balancer, [step_metadata(rank, 0)])
    with pytest.raises(mmbal.Error, match="balancer must be a StepBalancer"):
        mt.PrefetchingBalancer(mmbal.Orchestrator(ranks), lambda k: None)
    # a source returning something else on rank 2: raised there, named on the others
    with mt.PrefetchingBalancer(balancer, lambda k: {"samples": 1} if rank == 2 else step_metadata(rank, k)) as steps:
        expected = r"source\(0\) returned dict, not a LocalMetadata" if rank == 2 else r"rank\(s\) \[2\] raised"
        with pytest.raises(mmbal.Error, match=expected):
            steps.next()
    # the end of every rank's data ends the stream on every rank
    with mt.PrefetchingBalancer(balancer, lambda k: step_metadata(rank, k) if k < 2 else None) as steps:
        assert [s.index for s in steps] == [0, 1]
    return True


def test_bad_use_is_refused():
    assert torch_harness.run(bad_use_worker, 3) == [True] * 3


def one_bad_plan_worker(rank, ranks):
    """StepBalancer.plan with bad metadata on one rank raises on every rank (the bad rank still
    takes part in the gather) and leaves the ranks in step."""
    balancer = mt.StepBalancer(modalities=MODALITIES)
    local = step_metadata(rank, 0)
    if rank == 1:
        local = mt.LocalMetadata(1, [0], [3], [3], [8])  # modality 3 has no name here
    try:
        balancer.plan(local)
        raised = ""
    except mmbal.Error as e:
        raised = str(e)
    good = np.array([0, 1], np.int64)  # still in step: a plan and an exchange work
    plan = balancer.plan(mt.LocalMetadata(2, good, [0, 0], [3, 4], [0, 0]))
    assert plan.move_samples(torch.ones(7)).shape[0] == int(plan.llm.lengths[plan.llm_samples()].sum())
    return raised


def test_one_ranks_bad_metadata_raises_on_every_rank():
    out = torch_harness.run(one_bad_plan_worker, 3, timeout_s=30)
    assert "segment_modality id 3 has no name" in out[1]
    assert all("rank(s) [1] raised before the metadata gather" in out[r] for r in (0, 2)), out
