"""What lecture 4's kit logs: each call of xt_tp_weight_grad (kit/tp_grad.c) is a G event of
the case record, read here as a WeightGrad in rec.weight_grads."""

import dataclasses

import records


@dataclasses.dataclass
class WeightGrad:
    """One weight-gradient product of the kit's, a G line."""
    events_before: int  # how many of the record's events (E lines) came before it
    pending: int  # exchanges (receives, nonblocking collectives) pending when it finished
    pending_bytes: int  # their bytes


def parse_weight_grad(words):
    before, pending, pbytes = words
    return WeightGrad(int(before), int(pending), int(pbytes))


records.event_kind("G", "weight_grads", parse_weight_grad)
