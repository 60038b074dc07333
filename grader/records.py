"""What the ranks of a case wrote, read back: the case directory's files.

libxt's case mode (common/case_run.c, common/record.c) leaves, per case and rank, one file
(outputs_path): the arrays the rank wrote, then its record of its MPI calls and events,
notes, memory, and the events a lecture's kit logged (xt_event: a pipeline stage's calls,
an attention block's); per rank a status file of its faults (TODO, CRASH, ERROR, HANG,
LEDGER). This module reads them into plain objects; harness.py judges them. The inputs a
case reads are written here too, one file per group (inputs_path), in the names the program
expects.

A kit's events are its lecture's business: the lecture's package registers each kind it
logs with event_kind (its events.py: a pipeline lecture's "S" lines as StageCall in
rec.stages), and this module knows none of them.
"""

import dataclasses
import io
import math
import os
import re
from typing import List

import numpy as np

# --------------------------------------------------------------------- arrays

# The header libxt's xt_npy_write and NumPy's np.save both write (format 1.0 to 3.0): a
# little-endian or byte-order-free plain number type, C order.
NPY_HEADER = re.compile(rb"\{'descr': '([<|][a-z]\d+)', 'fortran_order': False, "
                        rb"'shape': \(((?:\d+, ?)*\d*)\), \} *\n")


def parse_npy(data, at=0):
    """The array that starts at data[at] in .npy form, and where it ends: (array, end). Read
    without np.load's header parser: a grade reads tens of thousands of small arrays, and
    np.load's own reading of the header (a Python tokenizer, for files older NumPy wrote) is
    most of the time each takes. ValueError for anything but the plain header above, or an
    array cut short."""
    if data[at:at + 6] != b"\x93NUMPY" or len(data) < at + 8 or data[at + 6] not in (1, 2, 3):
        raise ValueError("not an array in .npy form")
    start = at + (10 if data[at + 6] == 1 else 12)
    size = int.from_bytes(data[at + 8:start], "little")
    m = NPY_HEADER.fullmatch(data, start, start + size)
    if not m:
        raise ValueError("a .npy header other than the plain one")
    shape = tuple(int(x) for x in m.group(2).split(b",") if x.strip())
    dtype = np.dtype(m.group(1).decode())
    count = math.prod(shape)
    end = start + size + count * dtype.itemsize
    if len(data) < end:
        raise ValueError("an array cut short")
    return np.frombuffer(data, dtype, count, start + size).reshape(shape), end


def read_npy(path):
    """The array of a .npy file, as np.load reads it (a writable array of its own); any
    header other than the plain one goes to np.load."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    try:
        arr, end = parse_npy(data)
        if end == len(data):
            return arr
    except ValueError:
        pass
    return np.load(path)


def read_pack(path):
    """{name: array} of a file of arrays one after the other, each a line with its name and
    then the array in .npy form (common/case.c: a group's inputs, a rank's outputs); a
    later array of a name replaces an earlier one; {} without the file. An array cut short
    (its rank died writing it) ends the reading."""
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError:
        return {}
    out = {}
    for name, arr, _ in _entries(data):
        if arr is None:
            break
        out[name] = arr
    return out


RECORD_MARK = "#record"  # the line before a rank's record in its outputs file


def _entries(data):
    """(name, array, offset after it) of each array of a pack in turn; at a line RECORD_MARK
    (no array name begins with '#'), (RECORD_MARK, None, where the record starts), last."""
    at = 0
    while at < len(data):
        nl = data.find(b"\n", at)
        if nl < 0:
            return
        name = data[at:nl].decode(errors="replace")
        if name == RECORD_MARK:
            yield name, None, nl + 1
            return
        try:
            arr, at = parse_npy(data, nl + 1)
        except ValueError:
            return
        yield name, arr, at


def split_outputs(data):
    """A rank's outputs file: ({name: array} of the arrays before its record, the record's
    text or None when there is none: the rank did not finish). A file that is only a record
    gives ({}, its text)."""
    if data.startswith(b"# xt case record"):
        return {}, data.decode(errors="replace")
    arrays = {}
    for name, arr, at in _entries(data):
        if arr is None:
            return arrays, data[at:].decode(errors="replace")
        arrays[name] = arr
    return arrays, None


def record_text(data):
    """The text of the record in a rank's outputs file (its last part, after RECORD_MARK),
    or of a file that is only a record; None when there is none."""
    return split_outputs(data)[1]


def npy_bytes(a):
    """a (C-contiguous) in .npy form, format 1.0, as np.save writes it: the plain header
    (NPY_HEADER) padded with spaces to a multiple of 64 bytes, then the data. Built here,
    not by NumPy's writer, which takes longer than the data for the small arrays of a
    grade; anything but a little-endian plain number goes to NumPy's."""
    d = a.dtype
    if d.kind not in "biuf" or d.byteorder == ">" or (d.byteorder == "=" and
                                                      np.little_endian is False):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, a, allow_pickle=False)
        return buf.getvalue()
    descr = np.lib.format.dtype_to_descr(d)
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {a.shape!r}, }}"
    pad = -(10 + len(head) + 1) % 64
    head = (head + " " * pad + "\n").encode()
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head + a.tobytes()


def write_pack(path, arrays):
    """(name, array) pairs into one file, as read_pack and common/case.c read it."""
    parts = []
    for name, val in arrays:
        parts += [name.encode(), b"\n", npy_bytes(np.ascontiguousarray(val))]
    with open(path, "wb") as f:
        f.write(b"".join(parts))


def inputs_path(cdir, group):
    """Group `group`'s inputs of a case (common/case.c reads them)."""
    return os.path.join(cdir, f"g{group}.inputs")


def outputs_path(cdir, group, rank):
    """What rank `rank` of group `group` wrote with xt_case_output, then its record of the
    case (read_record)."""
    return os.path.join(cdir, f"g{group}.r{rank}.outputs")


def rank_arrays(cdir, group, np_, recs=None):
    """Each rank's arrays of group `group` of a case, by name: the inputs given to that rank
    alone, replaced by its outputs of the same name (so an array meant to be written in
    place of its input and never written reads as the input it was). recs: the group's
    records, read already with their arrays (read_record), or None to read the files."""
    given = read_pack(inputs_path(cdir, group))
    out = []
    for r in range(np_):
        prefix = f"r{r}."
        arrays = {n[len(prefix):]: a for n, a in given.items() if n.startswith(prefix)}
        arrays.update(recs[r].arrays if recs else read_pack(outputs_path(cdir, group, r)))
        out.append(arrays)
    return out


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
    # The peer's rank in the case's group, whichever communicator the message went on (a
    # sub-communicator's ranks translated): -1 for a collective, or a process outside it.
    case_peer: int = -1


# A kit's event kinds: {line kind: (the Record attribute its list is, parse(words))}.
_EVENT_KINDS = {}


def event_kind(kind, attribute, parse):
    """Registers a kit's event kind: each record line "<kind> w1 w2 ..." is parse([w1, w2,
    ...]), appended in order to rec.<attribute> (an empty list in a record without one). A
    lecture's package calls it when imported, for the kinds its kit logs."""
    if kind in _EVENT_KINDS and _EVENT_KINDS[kind][0] != attribute:
        raise ValueError(f"event kind {kind!r} is registered as rec.{_EVENT_KINDS[kind][0]}")
    if attribute in {f.name for f in dataclasses.fields(Record)}:
        raise ValueError(f"rec.{attribute} is a Record field, not a kit's event list")
    _EVENT_KINDS[kind] = (attribute, parse)


@dataclasses.dataclass
class Record:
    """What one rank wrote about one case: its MPI calls, events and notes."""
    seconds: float = 0.0
    calls: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)  # (kind, text)
    memory: dict = dataclasses.field(default_factory=dict)  # kind -> (current, peak) bytes
    work: dict = dataclasses.field(default_factory=dict)  # (array, block, part) -> rows
    # The kit's events by the attribute their kind registered (event_kind), in order; read
    # as rec.<attribute> (rec.stages). Lines of a kind nobody registered: in "unparsed".
    kit_events: dict = dataclasses.field(default_factory=dict)
    events_dropped: int = 0  # kit events past the log's cap, in no list
    complete: bool = False
    # The arrays the rank wrote (xt_case_output) before its record, in the same file.
    arrays: dict = dataclasses.field(default_factory=dict)

    def __getattr__(self, name):
        if not name.startswith("_") and name != "kit_events" and (name == "unparsed" or any(
                a == name for a, _ in _EVENT_KINDS.values())):
            return self.kit_events.setdefault(name, [])
        raise AttributeError(name)

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
    """One group's inputs of a case, in one file (inputs_path) as the program reads them: a
    list holds one array per rank (named r<rank>.<name>), an array is every rank's
    (<name>)."""
    arrays = []
    for name, val in inputs.items():
        if isinstance(val, list):
            arrays += [(f"r{r}.{name}", np.asarray(arr)) for r, arr in enumerate(val)]
        else:
            arrays.append((name, np.asarray(val)))
    write_pack(inputs_path(cdir, group), arrays)


def keep_expected(cdir, group, expected):
    """A failing group's arrays as .npy files, for a look with NumPy: each rank's
    g<group>.r<rank>.<name>.npy (what it wrote, or the input it was given) beside
    g<group>.r<rank>.<name>.expected.npy."""
    got = rank_arrays(cdir, group, len(expected))
    for r, per_rank in enumerate(expected):
        for name, exp in per_rank.items():
            try:
                np.save(os.path.join(cdir, f"g{group}.r{r}.{name}.expected.npy"),
                        np.asarray(exp))
                if name in got[r]:
                    np.save(os.path.join(cdir, f"g{group}.r{r}.{name}.npy"), got[r][name])
            except (OSError, ValueError):
                pass


def read_record(path):
    """The record of a rank's case: from its outputs file (outputs_path), or a file holding
    only a record; None when the rank did not finish the case."""
    rec = Record()
    try:
        with open(path, "rb") as f:
            rec.arrays, text = split_outputs(bytearray(f.read()))
    except OSError:
        return None
    if text is None:
        return None
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if head == "E":
            fn, d, peer, tag, nbytes, comm, case_peer, *inside = rest.split()
            compute, _, at = (inside[0] if inside else "").partition(":")
            comm, _, group = comm.partition("@")
            rec.events.append(Event(fn, d, int(peer), int(tag), int(nbytes), comm, compute,
                                    int(at) if at else -1, group, int(case_peer)))
        elif head == "C":
            fn, kind, *nums = rest.split()
            rec.calls[fn] = CallStats(kind, *map(int, nums))
        elif head == "T":
            rec.seconds = float(rest)
        elif head == "N":
            kind, text = rest.split(" ", 1)
            rec.notes.append((kind, text))
        elif head == "M":
            kind, current, peak = rest.split()
            rec.memory[kind] = (int(current), int(peak))
        elif head == "W":
            name, block, part, rows = rest.split()
            rec.work[(name, int(block), int(part))] = int(rows)
        elif head == "SD":
            rec.events_dropped = int(rest.split()[0])
        elif line == "END":
            rec.complete = True
        elif line and not line.startswith("#"):
            kind, *words = line.split()
            attribute, parse = _EVENT_KINDS.get(kind, ("unparsed", None))
            rec.kit_events.setdefault(attribute, []).append(parse(words) if parse else line)
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
