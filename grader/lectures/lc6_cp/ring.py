"""ring_attention.c: causal ring attention over the contiguous layout.

References are causal attention over the whole sequence in float64 (cp's
forward_reference and backward_reference: grader/nn.py's attention block over
T x T), of which each rank holds its positions' rows: o and lse forward; dq,
dk and dv backward, from the whole forward's o and lse given in float32 (so
the backward is graded on its own, whatever the forward did). q and k are
random normal x 1.5 (scores of a few units, so that the softmax is far from
uniform and a wrong block shows), v and the upstream gradient dout random
normal, different on every rank; dq, dk, dv arrive holding garbage.

Cases: np 1, 2, 3, 4 and 8; c = T/np rows per rank from 1 to 16; heads (hq,
hkv) = (1,1), (2,1), (4,2), (4,4) (grouped-query included); hd 2 to 8. At np 1
the ring has no step beyond the diagonal and sends nothing.

How it is computed (cp's ring rules, exact):
  - ring_traffic: point-to-point on comm only, every message to r+1 and from
    r-1; forward np-1 K/V blocks (2 c hkv hd floats each) per rank, no dK/dV;
    backward np-1 K/V and np dK/dV blocks (the last brings the accumulators
    home); np 1 sends nothing;
  - receive_under_compute: every block computed while a ring receive was
    still to complete ran with a receive posted (the next block's MPI_Irecv
    before the current block's compute), and none after the next step's
    bytes had arrived;
  - work_is: rank r makes exactly r+1 block calls (its diagonal and every
    earlier rank's) covering exactly the causal pairs of its queries, r c^2 +
    c(c+1)/2: a fully masked block computed, or a block computed twice, fails.

Tolerance: cp.TOLERANCE, each output within 4e-5 max(1, its largest |value|
over every rank). The forward's error is float32 rounding of a softmax over at
most 64 keys and np-1 merges; the backward's adds the float32 o and lse it is
given. Measured (grade.py --margins, seeds 1 to 6 and 11 to 16): the worst error
was 5.0% of the bound backward (dv), 1.6% forward (o). A wrong mask, a missing or extra block, a plain sum instead of the
merge, or a stale lse moves results by the size of an attention weight.
"""

from spec import test
from lectures.lc6_cp.cp import (attention_case, attention_inputs, backward_reference,
                                forward_reference, label, facets, receive_under_compute,
                                ring_traffic, row_locator, tolerance, work_is)

# (np, c, hq, hkv, hd): np 2 and 4 first (the grader's order), each head shape at np
# above 1; c = 1 (one row per rank: the diagonal block has no mask to get wrong), 3, 7
# and 16, few values so that the report can say which of them failed.
SHAPES = [(2, 3, 2, 1, 4), (2, 1, 1, 1, 5), (2, 7, 4, 2, 8),
          (4, 3, 4, 2, 5), (4, 7, 1, 1, 2), (4, 1, 4, 4, 6), (4, 16, 2, 1, 8),
          (8, 3, 2, 1, 4),
          (1, 7, 2, 1, 4), (1, 1, 1, 1, 3),
          (3, 3, 4, 4, 3), (3, 16, 2, 1, 2)]


def ring_cases(rng):
    return [attention_case(n, n * c, hq, hkv, hd) for n, c, hq, hkv, hd in SHAPES]


def blocks_per_rank(case, r):
    """Rank r computes its diagonal block and one block of each earlier rank."""
    return r + 1


@test("ring_attention", points=12, inputs=attention_inputs, reference=forward_reference,
      tolerance=tolerance, label=label, facets=facets, locate=row_locator,
      rules=[ring_traffic(lambda n: n - 1, lambda n: 0,
                          "K/V move np-1 times: the last step's block is never used"),
             receive_under_compute("F", "forward"),
             work_is("F", "forward", blocks_per_rank)],
      hint="at step s rank r holds rank r-s's K/V; the own block (s = 0) is causal, earlier "
           "ranks' blocks are full, later ranks' are skipped; merge each block's (o, lse) "
           "into the running ones with xt_lse_merge; post the next block's MPI_Irecv "
           "(and MPI_Isend) before computing the current one")
def ring_attention_forward(rng):
    return ring_cases(rng)


@test("ring_attention", points=16, inputs=attention_inputs, reference=backward_reference,
      tolerance=tolerance, label=label, facets=facets, locate=row_locator,
      rules=[ring_traffic(lambda n: n - 1, lambda n: n if n > 1 else 0,
                          "K/V move np-1 times; the dK/dV accumulators move np times, "
                          "the last bringing them home"),
             receive_under_compute("B", "backward"),
             work_is("B", "backward", blocks_per_rank)],
      hint="dq stays home (zero it first); the dK/dV of the block a rank holds travels with "
           "it: add the own queries' share (xt_attn_block_backward accumulates), send it on "
           "to r+1, and after np hops it is back at its owner; use the given o and lse "
           "(the whole row's), not a block's")
def ring_attention_backward(rng):
    return ring_cases(rng)
