"""What lecture 5's kit logs: each call of a pipeline stage (kit/stage.c, kit/tp_stage.c)
is an S event of the case record, read here as a StageCall in rec.stages."""

import dataclasses

import records


@dataclasses.dataclass
class StageCall:
    """One call of a pipeline stage, an S line of the record."""
    op: str  # F forward, B full backward, I its input part, W its weight part, N no-keep forward
    mb: int  # the micro-batch
    chunk: int  # the model chunk the stage is
    start: float  # seconds since the case began
    end: float
    first: int = 0  # the stage's first layer
    count: int = 0  # and its number of layers
    events_before: int = 0  # how many of the record's events (E lines) came before it
    # XT_MEM_ACTIVATIONS bytes in use when it began (-1: not logged); not part of a
    # comparison of calls, which is about the schedule
    activations: int = dataclasses.field(default=-1, compare=False)


def parse_stage(words):
    op, mb, chunk, start, end, first, count, before, *act = words
    return StageCall(op, int(mb), int(chunk), float(start), float(end), int(first), int(count),
                     int(before), int(act[0]) if act else -1)


records.event_kind("S", "stages", parse_stage)
