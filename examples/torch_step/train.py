"""A tiny multimodal model trained on 4 CPU processes (gloo), balanced by mmbal vs unbalanced.

The model: a vision encoder over image patches (patch embedding, one self-attention layer per
image, 2:1 pooling, connector) whose output tokens join the text tokens of their sample in a
small causal Transformer (next-token loss on text). Each step, every rank holds an uneven share
of the global batch (one rank holds nothing). Two identical models train side by side:

- unbalanced: every rank encodes its own images and runs the LLM on its own samples;
- balanced (``mmbal.torch.StepBalancer``): the image phase is balanced by its own cost
  (attention over patches), the patches move to their encoder rank, the encoder outputs go
  in ONE hop to their sample's LLM rank (composed plan), the text moves with its sample, and
  the LLM phase is balanced by the attention cost; per-sample losses are put back on their
  origin rank with ``restore``.

The loss is a SUM over the batch's text targets divided by the GLOBAL target count and the
gradients are all-reduced (sum), so placement cannot change them: the two runs must give the
same loss, the same per-sample losses and the same gradient of every parameter (float64,
relative 1e-6). Run ``python3 examples/torch_step/train.py`` (needs ``mmbal`` importable, e.g.
``PYTHONPATH=build/test/python``); ``--check`` exits 1 on any mismatch. With ``--prefetch``
each step's plan comes from ``mmbal.torch.PrefetchingBalancer``: step k+1 is gathered and
planned on a thread (on a process group of its own) while step k trains.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys
import tempfile
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

import mmbal.torch as mt

TEXT, IMAGE = 0, 1
PATCH_DIM, D_MODEL, VOCAB, MAX_LEN = 6, 16, 23, 160
ENCODER_COST = "attention:alpha=1,beta=0.05"  # per image: linear layers + attention over patches
LLM_COST = "attention:alpha=1,beta=0.02"  # per sample: the whole interleaved sequence


def image_tokens(patches: int) -> int:
    """LLM tokens of an image of `patches` patches (2:1 pooling)."""
    return (patches + 1) // 2


# ------------------------------------------------------------------------------------------
# data: a deterministic global batch per step; rank r takes the samples with owner r
# ------------------------------------------------------------------------------------------

Sample = List[Tuple[int, object]]  # segments: (TEXT, int64 ids) or (IMAGE, float64 patches)


def make_batch(step: int, ranks: int) -> List[List[Sample]]:
    """Per rank, its samples. Uneven on purpose: rank 1 holds nothing, the last rank holds the
    long ones; includes an image of 0 patches, a sample without segments and an image-only
    sample (zero-length items and samples without targets); odd steps have only those two
    images."""
    rng = np.random.default_rng([7, step])
    counts = [3, 0, 2, 7][:ranks] + [2] * max(0, ranks - 4)
    # every other step is almost text-only: its image phase has fewer images than ranks, so
    # some ranks receive nothing to encode
    image_share = 0.45 if step % 2 == 0 else 0.0
    out: List[List[Sample]] = []
    for r, count in enumerate(counts):
        samples: List[Sample] = []
        for k in range(count):
            big = r == ranks - 1
            segs: Sample = []
            for _ in range(int(rng.integers(1, 4))):
                if rng.random() < image_share:
                    p = int(rng.integers(4, 40 if big else 12))
                    segs.append((IMAGE, torch.from_numpy(rng.standard_normal((p, PATCH_DIM)))))
                else:
                    t = int(rng.integers(1, 30 if big else 8))
                    segs.append((TEXT, torch.from_numpy(rng.integers(0, VOCAB, t).astype(np.int64))))
            samples.append(segs)
        out.append(samples)
    # edge cases, fixed places: an empty image, a sample with nothing, an image-only sample
    out[0].append([(TEXT, torch.tensor([1, 2, 3])), (IMAGE, torch.zeros((0, PATCH_DIM), dtype=torch.float64)), (TEXT, torch.tensor([4]))])
    out[ranks - 1].append([])
    out[2 % ranks].append([(IMAGE, torch.from_numpy(rng.standard_normal((5, PATCH_DIM))))])
    return out


def local_metadata(samples: List[Sample]) -> mt.LocalMetadata:
    segs = []
    for s in samples:
        segs.append([(m, len(x), 0) if m == TEXT else (m, image_tokens(x.shape[0]), x.shape[0]) for m, x in s])
    return mt.LocalMetadata.from_samples(segs)


# ------------------------------------------------------------------------------------------
# model
# ------------------------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self, d: int, causal: bool):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.causal = causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [L, d], one sequence
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.T / math.sqrt(x.shape[-1])
        if self.causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        return self.out(torch.softmax(scores, dim=-1) @ v)


class VisionEncoder(nn.Module):
    """Patches of one image -> its LLM tokens (attention within the image only, so where an
    image is encoded cannot change its output)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(PATCH_DIM, D_MODEL)
        self.attn = Attention(D_MODEL, causal=False)
        self.connector = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, patches: torch.Tensor, counts: List[int]) -> torch.Tensor:
        outs = []
        for x in torch.split(patches, counts):
            if x.shape[0] == 0:
                outs.append(self.connector.weight[:0])  # 0 rows, but part of the graph
                continue
            h = self.embed(x)
            h = h + self.attn(h)
            t = image_tokens(x.shape[0])
            pool = torch.arange(x.shape[0]) // 2
            pooled = h.new_zeros((t, D_MODEL)).index_add(0, pool, h) / torch.bincount(pool, minlength=t).unsqueeze(1)
            outs.append(self.connector(pooled))
        # Always a tensor that requires grad: every rank must run the backward exchange
        # (a collective), also a rank that encodes nothing.
        return torch.cat(outs) if outs else self.connector.weight[:0]


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(MAX_LEN, D_MODEL)
        self.ln1 = nn.LayerNorm(D_MODEL)
        self.attn = Attention(D_MODEL, causal=True)
        self.ln2 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 32), nn.GELU(), nn.Linear(32, D_MODEL))
        self.head = nn.Linear(D_MODEL, VOCAB)

    def sample_loss(self, embeds: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """SUM of next-token cross-entropy over the text positions of one sequence."""
        if embeds.shape[0] < 2 or not bool(mask[1:].any()):
            return embeds.new_zeros(()) + 0.0 * embeds.sum()
        h = embeds + self.pos(torch.arange(embeds.shape[0]))
        h = h + self.attn(self.ln1(h))
        h = h + self.mlp(self.ln2(h))
        logits = self.head(h[:-1])
        keep = mask[1:]
        return F.cross_entropy(logits[keep], targets[1:][keep], reduction="sum")


class TinyMLLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision = VisionEncoder()
        self.lm = TinyLM()

    def assemble_loss(self, segments: List[Tuple[int, int]], ids: torch.Tensor, image_out: torch.Tensor) -> torch.Tensor:
        """One sample's summed loss; `segments` = [(modality, tokens)], `ids` its text ids,
        `image_out` its image tokens, both in sequence order."""
        parts, targets, mask = [], [], []
        ti = ii = 0
        for m, n in segments:
            if m == TEXT:
                x = ids[ti : ti + n]
                ti += n
                parts.append(self.lm.tok(x))
                targets.append(x)
                mask.append(torch.ones(n, dtype=torch.bool))
            else:
                parts.append(image_out[ii : ii + n])
                ii += n
                targets.append(torch.zeros(n, dtype=torch.int64))
                mask.append(torch.zeros(n, dtype=torch.bool))
        if not parts:
            return image_out.new_zeros(()) + 0.0 * image_out.sum()
        return self.lm.sample_loss(torch.cat(parts), torch.cat(targets), torch.cat(mask))


# ------------------------------------------------------------------------------------------
# one step, unbalanced and balanced
# ------------------------------------------------------------------------------------------


def targets_of(samples: List[Sample]) -> int:
    """Text positions that are predicted (a text token not at position 0)."""
    total = 0
    for s in samples:
        pos = 0
        for m, x in s:
            n = len(x) if m == TEXT else image_tokens(x.shape[0])
            if m == TEXT:
                total += n - (1 if pos == 0 and n > 0 else 0)
            pos += n
    return total


def step_unbalanced(model: TinyMLLM, samples: List[Sample]) -> torch.Tensor:
    """Per-sample summed losses of this rank's own samples (local order)."""
    images = [x for s in samples for m, x in s if m == IMAGE]
    counts = [x.shape[0] for x in images]
    enc = model.vision(torch.cat(images) if images else torch.zeros((0, PATCH_DIM), dtype=torch.float64), counts)
    losses, ii = [], 0
    for s in samples:
        segs = [(m, len(x) if m == TEXT else image_tokens(x.shape[0])) for m, x in s]
        ids = torch.cat([x for m, x in s if m == TEXT] or [torch.zeros(0, dtype=torch.int64)])
        n_img = sum(n for m, n in segs if m == IMAGE)
        losses.append(model.assemble_loss(segs, ids, enc[ii : ii + n_img]))
        ii += n_img
    return torch.stack(losses) if losses else model.lm.head.bias[:0]


def step_balanced(model: TinyMLLM, samples: List[Sample], plan: mt.StepPlan, log: Dict) -> torch.Tensor:
    """The same per-sample losses, computed where mmbal puts the work, restored to the origin."""
    meta = plan.meta
    log["plan"] = plan
    # 1. image phase: patches (local image order) -> encoder ranks; encode there
    if "image" in plan.phases:
        patches = torch.cat([x for s in samples for m, x in s if m == IMAGE] or [torch.zeros((0, PATCH_DIM), dtype=torch.float64)])
        moved = plan.move_encoder_inputs("image", patches)
        mine = plan.encoder_segments("image")
        enc = model.vision(moved, meta.segment_encoder_len[mine].tolist())
        # 2. encoder outputs -> their sample's LLM rank, in assembly order (one hop)
        image_out = plan.move_encoder_outputs("image", enc)
    else:
        image_out = torch.zeros((0, D_MODEL), dtype=torch.float64)
    # 3. text ids move with their sample (rows = the sample's text tokens)
    text_tokens = np.bincount(meta.segment_sample, weights=np.where(meta.segment_modality == TEXT, meta.segment_tokens, 0), minlength=meta.samples).astype(np.int64)
    ids = torch.cat([x for s in samples for m, x in s if m == TEXT] or [torch.zeros(0, dtype=torch.int64)])
    ids = plan.move_samples(ids, sizes=text_tokens)
    # 4. LLM phase on the samples now here
    order = np.argsort(meta.segment_sample, kind="stable")
    first = np.searchsorted(meta.segment_sample[order], np.arange(meta.samples + 1))
    losses, ti, ii = [], 0, 0
    for g in plan.llm_samples().tolist():
        seg_ids = order[first[g] : first[g + 1]]
        segs = [(int(meta.segment_modality[j]), int(meta.segment_tokens[j])) for j in seg_ids]
        nt = int(text_tokens[g])
        ni = sum(n for m, n in segs if m == IMAGE)
        losses.append(model.assemble_loss(segs, ids[ti : ti + nt], image_out[ii : ii + ni]))
        ti += nt
        ii += ni
    assert ti == ids.shape[0] and ii == image_out.shape[0], "assembly consumed every row"
    # (a rank without samples still joins the backward of `restore`: 0 rows in the graph)
    per_sample = torch.stack(losses) if losses else model.lm.head.bias[:0]
    # Every rank must run the backward of every exchange (a collective): keep the image
    # tokens in the graph also where no sample here uses them (adds exactly 0).
    per_sample = per_sample + 0.0 * image_out.sum()
    # 5. per-sample losses back to their origin rank (local sample order), differentiable
    return plan.restore(per_sample.view(-1, 1), sizes=np.ones(meta.samples, np.int64)).view(-1)


def global_loss(per_sample: torch.Tensor, total_targets: int) -> torch.Tensor:
    return per_sample.sum() / total_targets


def all_reduce_grads(model: nn.Module) -> None:
    for p in model.parameters():
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)


def rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(a.abs().max()) if a.numel() else 0.0, float(b.abs().max()) if b.numel() else 0.0, 1e-300)
    return float((a - b).abs().max()) / scale if a.numel() else 0.0


def format_loads(name: str, before, after) -> str:
    return f"{name:>5}: before [{', '.join(f'{v:8.1f}' for v in before)}]  after [{', '.join(f'{v:8.1f}' for v in after)}]"


def worker(rank: int, ranks: int, init_file: str, steps: int, engine: str, prefetch: bool, results) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=ranks, timeout=datetime.timedelta(seconds=60))
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    plain = TinyMLLM()
    balanced = TinyMLLM()
    balanced.load_state_dict(plain.state_dict())
    opt_p = torch.optim.SGD(plain.parameters(), lr=0.05)
    opt_b = torch.optim.SGD(balanced.parameters(), lr=0.05)
    # With --prefetch the balancer gathers on a process group of its own: step k+1 is gathered
    # and planned on a thread while step k runs its exchanges on the default group.
    balancer = mt.StepBalancer(
        modalities=("text", "image"), policies={"llm": (LLM_COST, "lpt"), "image": (ENCODER_COST, "lpt")}, engine=engine, metadata_group=dist.new_group() if prefetch else None
    )
    prefetcher = mt.PrefetchingBalancer(balancer, lambda k: local_metadata(make_batch(k, ranks)[rank]) if k < steps else None) if prefetch else None
    worst = 0.0
    empty_receivers = 0
    for step in range(steps):
        samples = make_batch(step, ranks)[rank]
        if prefetcher is not None:
            prefetched = prefetcher.next()
            assert prefetched.index == step
            plan = prefetched.plan
        else:
            plan = balancer.plan(local_metadata(samples))
        total = torch.tensor([targets_of(samples)], dtype=torch.int64)
        dist.all_reduce(total)
        total_targets = int(total)
        log: Dict = {}
        ls_p = step_unbalanced(plain, samples)
        ls_b = step_balanced(balanced, samples, plan, log)
        loss_p, loss_b = global_loss(ls_p, total_targets), global_loss(ls_b, total_targets)
        opt_p.zero_grad()
        opt_b.zero_grad()
        loss_p.backward()
        loss_b.backward()
        all_reduce_grads(plain)
        all_reduce_grads(balanced)
        lp, lb = loss_p.detach().clone(), loss_b.detach().clone()
        dist.all_reduce(lp)
        dist.all_reduce(lb)
        diffs = {"loss": rel_diff(lp, lb), "per-sample": rel_diff(ls_p.detach(), ls_b.detach())}
        for (name, gp), (_, gb) in zip(plain.named_parameters(), balanced.named_parameters()):
            diffs[name] = rel_diff(gp.grad, gb.grad)
        name, d = max(diffs.items(), key=lambda kv: kv[1])
        worst = max(worst, d)
        plan = log["plan"]
        if rank == 0:
            print(f"step {step}: loss {float(lp):.10f} (balanced {float(lb):.10f}); worst relative difference {d:.2e} ({name})")
            for phase in plan.phases.values():
                before, after = plan.loads(phase.name)
                print("  " + format_loads(phase.name, before, after) + f"  ({phase.cost}, {len(phase.items)} items)")
        for phase in plan.phases.values():
            empty_receivers += int(np.sum(np.bincount(np.asarray(phase.target.rank), minlength=ranks) == 0))
        opt_p.step()
        opt_b.step()
    if prefetcher is not None:
        assert prefetcher.next() is None  # every rank's data ended at the same step
        prefetcher.stop()
    results[rank] = (worst, empty_receivers)
    dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--engine", choices=mt.StepBalancer.ENGINES, default="orchestrator", help="how StepBalancer plans (default: mmbal.Orchestrator)")
    ap.add_argument("--prefetch", action="store_true", help="plan step k+1 on a thread during step k (mmbal.torch.PrefetchingBalancer)")
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--check", action="store_true", help="exit 1 unless balanced == unbalanced within the tolerance")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        manager = mp.Manager()
        results = manager.dict()
        mp.spawn(worker, args=(args.ranks, os.path.join(tmp, "init"), args.steps, args.engine, args.prefetch, results), nprocs=args.ranks, join=True)
        worst = max(results[r][0] for r in range(args.ranks))
        empty = results[0][1]
    print(f"worst relative difference over {args.steps} steps, every parameter: {worst:.2e} (tolerance {args.tolerance:g}); phase slots with an empty rank: {empty}")
    if args.check and not (worst <= args.tolerance and empty > 0):
        print("FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
