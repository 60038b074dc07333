"""What the ranks of a case wrote, read back: the case directory's files.

libxt's case mode (common/case_run.c, common/record.c) leaves, per case and rank, a record
of its MPI calls and events, notes, memory, and the calls of the lecture kits' compute
(pipeline stages, attention blocks, experts); per rank a status file of its faults (TODO,
CRASH, ERROR, HANG, LEDGER). This module reads them into plain objects; harness.py judges
them. The inputs a case reads are written here too, in the names the program expects.
"""

import dataclasses
import os
from typing import List

import numpy as np

# --------------------------------------------------------------------- records


@dataclasses.dataclass
class CallStats:
    kind: str
    calls: int
    msgs_sent: int
    msgs_recv: int
    bytes_sent: int
    bytes_recv: int


@dataclasses.dataclass
class Event:
    fn: str
    dir: str  # S sent, R received, C collective
    peer: int
    tag: int
    bytes: int
    comm: str  # case, world, self, other
    compute: str = ""  # the libxt computation it happened inside ("backward"), or ""
    compute_at: int = -1  # where in it: the layer whose hook was running, or -1
    # For comm "other": the group libxt named it (a process mesh's "dp", "pp", "tp", or
    # "mesh", its own communicator), written "other@pp"; "" for any other communicator.
    group: str = ""


@dataclasses.dataclass
class StageCall:
    """One call of a pipeline stage (common/stage.c), an S line of the record."""
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


@dataclasses.dataclass
class AttnCall:
    """One call of libxt's attention block (common/attn_block.c), an A line of the record."""
    op: str  # F forward, B backward; T a tile of scores (xt_attn_scores)
    nq: int
    nk: int
    mask: str  # N none, C causal, S shifted
    pairs: int  # the (query, key) position pairs it computed
    start: float  # seconds since the case began
    end: float
    events_before: int = 0  # how many of the record's events (E lines) came before it
    recv_pending: int = 0  # receives started and not complete while it ran
    recv_bytes: int = 0  # the bytes those receives expect


@dataclasses.dataclass
class ExpertCall:
    """One expert's part of a call of libxt's expert bank (common/moe.c), an X line."""
    op: str  # F forward, B backward
    expert: int  # its global index
    tokens: int  # the rows it computed
    start: float  # seconds since the case began
    end: float
    events_before: int = 0  # how many of the record's events (E lines) came before it
    pending: int = 0  # exchanges (receives, nonblocking collectives) pending while it ran
    pending_bytes: int = 0  # their bytes


@dataclasses.dataclass
class Record:
    """What one rank wrote about one case: its MPI calls, events and notes."""
    seconds: float = 0.0
    calls: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)  # (kind, text)
    memory: dict = dataclasses.field(default_factory=dict)  # kind -> (current, peak) bytes
    stages: list = dataclasses.field(default_factory=list)  # StageCall, in call order
    attn: list = dataclasses.field(default_factory=list)  # AttnCall, in call order
    experts: list = dataclasses.field(default_factory=list)  # ExpertCall, in call order
    work: dict = dataclasses.field(default_factory=dict)  # (array, block, part) -> rows
    stages_dropped: int = 0  # compute calls past the log's cap, in no list
    complete: bool = False

    @property
    def msgs_sent(self):
        return sum(s.msgs_sent for s in self.calls.values())

    @property
    def msgs_recv(self):
        return sum(s.msgs_recv for s in self.calls.values())

    @property
    def bytes_sent(self):
        return sum(s.bytes_sent for s in self.calls.values())

    def sends(self):
        return [e for e in self.events if e.dir == "S"]


def write_inputs(cdir, group, inputs):
    """One group's inputs of a case, as the program reads them: a list holds one array
    per rank (g<group>.r<rank>.<name>.npy), an array is every rank's (g<group>.<name>.npy)."""
    for name, val in inputs.items():
        if isinstance(val, list):
            for r, arr in enumerate(val):
                np.save(os.path.join(cdir, f"g{group}.r{r}.{name}.npy"), arr)
        else:
            np.save(os.path.join(cdir, f"g{group}.{name}.npy"), val)


def keep_expected(cdir, group, expected):
    """A failing group's expected arrays beside its outputs, for a look with NumPy:
    g<group>.r<rank>.<name>.expected.npy next to g<group>.r<rank>.<name>.npy."""
    for r, per_rank in enumerate(expected):
        for name, exp in per_rank.items():
            try:
                np.save(os.path.join(cdir, f"g{group}.r{r}.{name}.expected.npy"),
                        np.asarray(exp))
            except (OSError, ValueError):
                pass


def read_record(path):
    rec = Record()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("T "):
            rec.seconds = float(line[2:])
        elif line.startswith("C "):
            _, fn, kind, *nums = line.split()
            rec.calls[fn] = CallStats(kind, *map(int, nums))
        elif line.startswith("E "):
            _, fn, d, peer, tag, nbytes, comm, *inside = line.split()
            compute, _, at = (inside[0] if inside else "").partition(":")
            comm, _, group = comm.partition("@")
            rec.events.append(Event(fn, d, int(peer), int(tag), int(nbytes), comm, compute,
                                    int(at) if at else -1, group))
        elif line.startswith("N "):
            _, kind, text = line.split(" ", 2)
            rec.notes.append((kind, text))
        elif line.startswith("M "):
            _, kind, current, peak = line.split()
            rec.memory[kind] = (int(current), int(peak))
        elif line.startswith("S "):
            _, op, mb, chunk, start, end, first, count, before, *act = line.split()
            rec.stages.append(StageCall(op, int(mb), int(chunk), float(start), float(end),
                                        int(first), int(count), int(before),
                                        int(act[0]) if act else -1))
        elif line.startswith("A "):
            _, op, nq, nk, mask, pairs, start, end, before, pending, pbytes = line.split()
            rec.attn.append(AttnCall(op, int(nq), int(nk), mask, int(pairs), float(start),
                                     float(end), int(before), int(pending), int(pbytes)))
        elif line.startswith("X "):
            _, op, expert, tokens, start, end, before, pending, pbytes = line.split()
            rec.experts.append(ExpertCall(op, int(expert), int(tokens), float(start), float(end),
                                          int(before), int(pending), int(pbytes)))
        elif line.startswith("W "):
            _, name, block, part, rows = line.split()
            rec.work[(name, int(block), int(part))] = int(rows)
        elif line.startswith("SD "):
            rec.stages_dropped = int(line.split()[1])
        elif line == "END":
            rec.complete = True
    return rec if rec.complete else None


def read_record_table(path):
    """The per-function table of a counters file written at finalize (mpi.r<rank>.txt)."""
    table = {}
    with open(path) as f:
        for line in f:
            if line.startswith("C "):
                _, fn, kind, *nums = line.split()
                table[fn] = CallStats(kind, *map(int, nums))
    return table


@dataclasses.dataclass
class StatusLine:
    kind: str
    case: int
    group: int
    rank: int
    world: int
    text: str
    us: int = 0  # when, in wall-clock microseconds
    backtrace: List[str] = dataclasses.field(default_factory=list)
    asan: List[str] = dataclasses.field(default_factory=list)  # AddressSanitizer's report


def read_status(launch_dir, world):
    """The fault lines every rank wrote (TODO, CRASH, ERROR, HANG)."""
    out = []
    for w in range(world):
        path = os.path.join(launch_dir, f"status.r{w}.txt")
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        bt = None
        for line in lines:
            if bt is not None:
                if line == "END":
                    bt = None
                else:
                    bt.append(line)
                continue
            if line in ("BACKTRACE", "ASAN"):
                if out:
                    bt = out[-1].backtrace if line == "BACKTRACE" else out[-1].asan
                else:
                    bt = []
                continue
            parts = line.split("\t", 6)
            if len(parts) < 7:
                continue
            try:
                vals = {p.split("=")[0]: int(p.split("=")[1]) for p in parts[1:6]}
            except (ValueError, IndexError):
                continue
            out.append(StatusLine(parts[0], vals["case"], vals["group"], vals["rank"],
                                  vals["world"], parts[6], vals["us"]))
    return out
