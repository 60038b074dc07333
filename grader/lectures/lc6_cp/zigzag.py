"""zigzag_attention.c: causal ring attention over the zigzag layout (2 np chunks of c'
positions, rank r holding chunk r and chunk 2np-1-r), half a block on every step but
the first.

Cases: np 1 to 4, c' from 1 (one position per chunk) to 8, so T = 2 np c' from 2 to
64; heads (hq, hkv) (1,1), (2,1), (4,2) and (4,4), so grouped-query sharing is met at
every np from 2 on; hd 2 to 8. Inputs are random and different at every position
(cp.attention_inputs: q and k of scale 1.5, so that the softmax is far from uniform),
and the upstream gradient dout is random. The backward receives the whole forward's o
and lse rows (float32 of the float64 reference), so it is graded on its own, whatever
the forward does.

The reference is causal attention over the whole sequence in float64 (nn's attention
block with the causal mask over T x T, itself checked against finite differences),
each rank holding its positions' rows in the zigzag order (cp.positions).

How it is computed, from the messages (PMPI) and libxt's log of attention blocks:
  - ring_traffic: point-to-point only, to r+1 and from r-1, forward np-1 K/V blocks,
    backward np-1 K/V blocks and np dK/dV blocks (2 c hkv hd floats each);
  - receive_under_compute: each block computed while a receive is still to come ran
    with one posted (the transfer under the compute), none after the next step's
    bytes had arrived;
  - zigzag_balance: every rank computes the same number of (query, key) pairs,
    c'^2 (2np-1) + c'(c'+1), and exactly its causal pairs (cp.work_is): a full block
    whose masked half is thrown away, or a half computed twice, fails it.

Tolerance: cp.TOLERANCE, each output within 4e-5 max(1, its largest |value| over every
rank). Measured (grade.py --margins, seeds 1 to 5): the worst error was 2.7% of the
bound (backward, dq; forward 1.2%, o). A wrong half, a missing block or a wrong merge
moves an output by the size of a block's weight in the softmax, far above it.
"""

from spec import hinted, test
from lectures.lc6_cp.cp import (attention_case, attention_inputs, backward_reference, facets,
                                forward_reference, label, receive_under_compute, ring_traffic,
                                row_locator, tolerance, zigzag_balance)

# (np, c', hq, hkv, hd)
SHAPES = [(1, 2, 1, 1, 3), (1, 5, 4, 2, 4),
          (2, 1, 2, 1, 2), (2, 3, 4, 4, 5), (2, 6, 4, 2, 8),
          (3, 1, 1, 1, 4), (3, 4, 2, 1, 3), (3, 7, 4, 4, 2),
          (4, 1, 4, 2, 6), (4, 2, 1, 1, 8), (4, 3, 4, 4, 2), (4, 8, 2, 1, 5)]


def zigzag_cases():
    return [attention_case(n, 2 * n * h, hq, hkv, hd, layout="zigzag")
            for n, h, hq, hkv, hd in SHAPES]


def zigzag_facets(case):
    """cp.facets, and the chunk c' (1: each chunk one position)."""
    return {**facets(case), "c'": case["T"] // (2 * case.np)}


FORBIDDEN = [(r"^xt_attention_(forward|backward)$",
              "calls {}, libxt's whole-sequence attention: the ring computes its blocks with "
              "xt_attn_block_forward/_backward")]

FORWARD_RING = hinted(
    ring_traffic(lambda n: n - 1, lambda n: 0,
                 "the forward: the last block is computed, not passed on"),
    "cause: the ring's messages: each step but the last sends the block held to r+1 and "
    "receives the next from r-1, K and V together; np-1 rotations in all")
BACKWARD_RING = hinted(
    ring_traffic(lambda n: n - 1, lambda n: n if n > 1 else 0,
                 "the backward: K/V as the forward, and each block's dK/dV one step more, "
                 "home"),
    "cause: the backward's messages: K/V travel as in the forward (np-1 rotations); the "
    "dK/dV accumulator of the block computed moves on after every step, np times, so that "
    "after the last it is back with the rank that owns the block")
FORWARD_OVERLAP = hinted(
    receive_under_compute("F", "forward"),
    "cause: a blocking exchange: post MPI_Irecv of the next block (and MPI_Isend of the "
    "current one) before computing the current block, and wait after")
BACKWARD_OVERLAP = hinted(
    receive_under_compute("B", "backward"),
    "cause: a blocking exchange: post the receives of the next K/V block and of the next "
    "dK/dV accumulator before computing the current block, and wait after")
BALANCE_HINT = ("cause: the work per step: the own block is causal over both chunks; a block "
                "from src < r is seen by both query chunks but only in its first chunk; a "
                "block from src > r only by the second query chunk, all of it. Compute those "
                "halves and nothing else")


@test("zigzag_attention", points=10, inputs=attention_inputs, reference=forward_reference,
      tolerance=tolerance, label=label, facets=zigzag_facets, locate=row_locator,
      forbidden=FORBIDDEN,
      rules=[FORWARD_RING, FORWARD_OVERLAP,
             hinted(zigzag_balance("F", "forward"), BALANCE_HINT)],
      hint="at step s rank r holds rank r-s's K/V: step 0 causal over the 2c' rows; src < r: "
           "every query against the block's first chunk; src > r: the second query chunk "
           "against the whole block; xt_lse_merge each result into the rows it computed")
def zigzag_attention_forward(rng):
    return zigzag_cases()


@test("zigzag_attention", points=12, inputs=attention_inputs, reference=backward_reference,
      tolerance=tolerance, label=label, facets=zigzag_facets, locate=row_locator,
      forbidden=FORBIDDEN,
      rules=[BACKWARD_RING, BACKWARD_OVERLAP,
             hinted(zigzag_balance("B", "backward"), BALANCE_HINT)],
      hint="the forward's half blocks through xt_attn_block_backward with the whole rows' o "
           "and lse; dq stays home, the visiting block's dK/dV go into its accumulator, which "
           "travels with it and arrives home after np steps")
def zigzag_attention_backward(rng):
    return zigzag_cases()

