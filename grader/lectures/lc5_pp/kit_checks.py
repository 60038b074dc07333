"""make test's checks of lecture 5's kit beyond its numeric cases (grader/nntest.py runs
those): the process mesh (kit/mesh.c, through kit/tests/test_mesh.c)."""

import os
import re

import numpy as np

from testkit import fresh, mpirun, status_lines, tail


def selftest(s):
    s.section("lc5_pp kit")
    test_mesh(s)


def test_mesh(s):
    """Each rank's coordinates and groups (world ranks, in order) against the slices of
    numpy.arange(np).reshape(sizes); then the two ways a mesh stops the run."""
    exe = os.path.join("build", "grader", "lectures", "lc5_pp", "kit", "tests", "test_mesh")
    for np_, desc in ((8, "dp=2,pp=2,tp=2"), (4, "pp=2,tp=2"), (4, "dp=4,tp=1"), (2, "dp=2"),
                      (1, "1x1x1"), (4, "dp=2,pp=1,tp=2")):
        d = fresh("mesh")
        r = mpirun(np_, [exe, "--mesh", desc, "--out", d])
        dims = [p.split("=") for p in desc.split(",")] if "=" in desc else \
            [(n, "1") for n in ("dp", "pp", "tp")]
        grid = np.arange(np_).reshape([int(size) for _, size in dims])
        problems = [] if r.returncode == 0 else tail(r.output)
        for rank in range(np_):
            c = tuple(int(i) for i in np.argwhere(grid == rank)[0])
            want = ["coords " + " ".join(map(str, c))] + [
                f"{name} " + " ".join(map(str, grid[c[:k] + (slice(None),) + c[k + 1:]]))
                for k, (name, _) in enumerate(dims)]
            path = os.path.join(d, f"mesh.r{rank}.txt")
            got = open(path).read().splitlines() if os.path.exists(path) else ["(no file)"]
            if got != want and r.returncode == 0:
                problems.append(f"rank {rank}: {got}, expected {want}")
        wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
        if np_ == 8 and ("tp groups: [0 1] [2 3] [4 5] [6 7]" not in r.output or wide):
            problems.append("xt_mesh_print: " + " | ".join(wide or tail(r.output, 4)))
        s.record(f"mesh {desc} on {np_}: coordinates, and every group's ranks in order, as "
                 "arange(np).reshape(sizes) slices them", not problems, problems)
    for mode, desc, pattern, what in (
            ("size", "dp=2,pp=2,tp=2", r'mesh "dp=2,pp=2,tp=2": .* is 8 ranks, but the '
             r"communicator has 4", "a product that is not the size"),
            ("unknown", "pp=2,tp=2", r'xt_mesh_group: the mesh has no dimension "cp" '
             r"\(it has pp, tp\)", "an unknown dimension's name")):
        d = fresh(f"mesh_{mode}")
        r = mpirun(4, [exe, "--mesh", desc, "--mode", mode, "--out", d])
        lines = status_lines(d)
        s.record(f"mesh: {what} stops the run with its message", r.returncode != 0 and
                 any(re.search("^ERROR.*" + pattern, ln) for ln in lines),
                 lines + tail(r.output, 8))
