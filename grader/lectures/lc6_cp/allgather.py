"""allgather_kv_attention.c: Llama 3's context parallelism: K and V all-gathered across the
context group, each rank's queries (zigzag rows) against the whole sequence's keys; the
backward's dK and dV reduce-scattered back to their owners.

Cases: as zigzag_attention's (np 1 to 4, c' 1 to 8, heads (1,1), (2,1), (4,2), (4,4)), the
same inputs (cp.attention_inputs) and references (causal attention over the whole sequence in
float64, each rank holding its zigzag rows), tolerance cp.TOLERANCE.

How it is computed, from the collectives (PMPI) and libxt's log of attention blocks:
  - forward: exactly one MPI_Allgather of K and one of V, c hkv hd floats from each rank, on
    comm, nothing else (cp.collectives_exactly);
  - backward: the same two all-gathers and one MPI_Reduce_scatter_block of dK and one of dV
    (np c hkv hd floats sent each; MPI_Reduce_scatter with equal counts is the same), nothing
    else;
  - zigzag_balance: every rank computes the same number of (query, key) pairs and exactly
    its causal ones: a block above the diagonal computed and thrown away fails it.
"""

from spec import hinted, test
from lectures.lc6_cp.cp import (attention_inputs, backward_reference, collectives_exactly,
                                forward_reference, label, row_locator, tolerance,
                                zigzag_balance)
from lectures.lc6_cp.zigzag import FORBIDDEN, zigzag_cases, zigzag_facets


def kv_bytes(case):
    """One rank's K (or V) rows in bytes: c hkv hd floats."""
    return (case["T"] // case.np) * case["hkv"] * case["hd"] * 4


def forward_calls(case):
    b = kv_bytes(case)
    return [("MPI_Allgather", "K", b), ("MPI_Allgather", "V", b)]


def backward_calls(case):
    rs = ("MPI_Reduce_scatter_block", "MPI_Reduce_scatter")
    return forward_calls(case) + [(rs, "dK", case.np * kv_bytes(case)),
                                  (rs, "dV", case.np * kv_bytes(case))]


BALANCE_HINT = ("cause: the blocks: each own chunk's queries against every earlier chunk's "
                "keys with no mask, and against their own chunk's causal; nothing later")


@test("allgather_kv_attention", points=8, inputs=attention_inputs, reference=forward_reference,
      tolerance=tolerance, label=label, facets=zigzag_facets, locate=row_locator,
      forbidden=FORBIDDEN,
      rules=[collectives_exactly(forward_calls, "each rank's c hkv hd floats, gathered rank by "
                                                "rank"),
             hinted(zigzag_balance("F", "forward"), BALANCE_HINT)],
      hint="gather K and V (rank p's rows: chunk p, then chunk 2np-1-p) and put them in "
           "sequence order; for each own chunk j: xt_attn_block_forward against chunk j's "
           "keys (causal), and against keys 0 .. j c' - 1 (no mask), merged with xt_lse_merge")
def allgather_kv_forward(rng):
    return zigzag_cases()


@test("allgather_kv_attention", points=8, inputs=attention_inputs,
      reference=backward_reference, tolerance=tolerance, label=label, facets=zigzag_facets,
      locate=row_locator, forbidden=FORBIDDEN,
      rules=[collectives_exactly(backward_calls, "K and V gathered again; dK and dV of the "
                                                 "whole sequence summed and scattered home"),
             hinted(zigzag_balance("B", "backward"), BALANCE_HINT)],
      hint="the forward's blocks through xt_attn_block_backward (dq zeroed first) into dK and "
           "dV of the whole sequence; put them back rank by rank (rank p's chunks p and "
           "2np-1-p together) and MPI_Reduce_scatter_block each: every rank gets its rows, "
           "summed over every rank's queries")
def allgather_kv_backward(rng):
    return zigzag_cases()
