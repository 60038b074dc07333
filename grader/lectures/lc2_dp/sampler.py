"""distributed_sampler.c: the test of lecture 2's sampler.

The reference is the plain definition of PyTorch's DistributedSampler, with
nn.permutation as the shuffle (bit-identical to libxt's xt_permutation):
the order, cut or padded by wrapping to a multiple of np, rank r taking
every np-th entry from position r. Each case runs three epochs; the output
`epoch<e>` holds exactly the indices distributed_sampler returned, so a
wrong return value shows as a list of the wrong length.
"""

import numpy as np

import nn
import spec
from spec import NPS, test

EPOCHS = 3


def sizes(np_, rng):
    """Data-set sizes for np ranks: empty, one sample, fewer samples than ranks
    (2 and np/2 - 1: padding that wraps around more than once), divisible by
    np and not, and a few hundred."""
    return sorted({0, 1, 2, max(np_ // 2 - 1, 0), max(np_ - 1, 0), np_, np_ + 1, 3 * np_ + 2,
                   4 * np_, int(rng.integers(200, 400))})


def sampler_label(case):
    """'np=3 n=10 shuffle drop_last seed=7', 'np=4 n=7 in order padded seed=7'."""
    return (f"np={case.np} n={case['n']} {spec.word(case, 'shuffle')} "
            f"{spec.word(case, 'drop_last')} seed={case['seed']}")


def sampler_facets(case):
    """n % np: where it is 0 there is nothing to pad or drop, so a sampler wrong only at
    the padding or at drop_last fails exactly where it is not."""
    return {"n%np": case["n"] % case.np}


def sampler_indices(n, np_, epoch, seed, shuffle, drop_last):
    """Each rank's indices in one epoch: DistributedSampler's definition."""
    order = nn.permutation(seed + epoch, n) if shuffle else np.arange(n, dtype=np.int64)
    if drop_last:
        total = (n // np_) * np_
        padded = order[:total]
    else:
        total = -(-n // np_) * np_
        padded = order[np.arange(total) % n] if n else order
    return [padded[r::np_].astype(np.int64) for r in range(np_)]


def sampler_inputs(case, rng):
    return {}  # everything is in the case's parameters


def sampler_reference(case, inputs):
    out = [{} for _ in range(case.np)]
    for e in range(case["epochs"]):
        per_rank = sampler_indices(case["n"], case.np, e, case["seed"], case["shuffle"],
                                   case["drop_last"])
        for r in range(case.np):
            out[r][f"epoch{e}"] = per_rank[r]
    return out


def no_communication(case, inputs, records):
    """A sampler needs no messages: every rank derives its share from the seed."""
    out = []
    for r, rec in enumerate(records):
        used = sorted(fn for fn, st in rec.calls.items()
                      if st.kind in ("p2p", "coll", "comm", "rma") and st.calls)
        if used:
            out.append((r, f"rank {r} called {', '.join(used)}: a sampler needs no "
                           f"communication, every rank draws the same order from seed + epoch "
                           f"and takes its own share (only MPI_Comm_rank and MPI_Comm_size)"))
    return out


@test("distributed_sampler", points=10,
      inputs=sampler_inputs, reference=sampler_reference, label=sampler_label,
      words={"shuffle": ("shuffle", "in order"), "drop_last": ("drop_last", "padded")},
      facets=sampler_facets, rules=[no_communication],
      hint="'epoch<e>' holds the indices the rank got in epoch e, as many as "
           "distributed_sampler returned")
def distributed_sampler(rng):
    """Every data-set size of sizes(), in order and shuffled, with and without drop_last."""
    specs = []
    for np_ in NPS:
        for n in sizes(np_, rng):
            for shuffle in (0, 1):
                for drop_last in (0, 1):
                    specs.append({"np": np_, "n": n, "epochs": EPOCHS, "shuffle": shuffle,
                                  "drop_last": drop_last,
                                  "seed": int(rng.integers(0, 2**63, dtype=np.uint64))})
    return specs
