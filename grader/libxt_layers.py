#!/usr/bin/env python3
"""libxt's structure, checked on its built objects.

common/xt_internal.h states the layers of libxt's files:

    /* LAYERS (each file uses only files above it):
     *   0 core_state.c core_clock.c dtype.c
     *   1 core_err.c mpi_names.c
     *   ...
     */

and, under headings of the form /* <file>.c */, the internal (xti_) functions
each file defines. This script reads the objects build/common/<file>.o (it
builds nothing: run `make build/common/libxt.a` first; build/common/cuda.cu.o,
from `make CUDA=1 cuda`, is checked when present), maps every global symbol
to the file that defines it with `nm`, and reports:

  - a file that uses a symbol of a file in its own layer or a later one;
  - a libxt source file missing from LAYERS, or listed there but absent;
  - an xti_ symbol declared in xt_internal.h under the wrong file's heading,
    not declared at all, or declared but defined nowhere;
  - a lecture named in common/ (lcN_..., "lecture N");
  - a declaration of xt_harness.h (what only the runner, benchmarks and
    tests call) repeated in xt.h or xt_nn.h (what an exercise includes).

usage() measures which lectures use each libxt file: the global symbols the
objects of a lecture's programs, kit and bench driver leave undefined
(build/<lecture>/, build/solutions/<lecture>/, build/grader/lectures/<lecture>/),
followed through libxt's own calls. single_lecture() reports a file that
exactly one lecture uses: it belongs in that lecture's kit. The CUDA layer
(cuda.cu) is libxt's whatever lectures have CUDA exercises (DEVICE_LAYER), and
resident.c is the main the grader links into every lecture's resident program
(GRADER_MAIN), which no object calls.

    python3 grader/libxt_layers.py [--root DIR]   prints the layers, each file's
                                                  lectures and the problems; exit 1 on any
    import libxt_layers; libxt_layers.check(root) -> [problem, ...]
                         libxt_layers.layers(root) -> [(n, [file, ...]), ...]
                         libxt_layers.usage(root) -> {file: {lecture, ...}}
"""

import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERNAL = "common/xt_internal.h"
EXERCISE_HEADERS = ("common/xt.h", "common/xt_nn.h")
HARNESS_HEADER = "common/xt_harness.h"
LECTURE = re.compile(r"lc[1-7]_|lecture [1-7]", re.I)
HEADING = re.compile(r"^/\* ([A-Za-z0-9_]+\.(?:c|cu)) \*/$")


class LayersError(Exception):
    pass


def _read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        return f.read()


def layers(root=ROOT):
    """The LAYERS block of xt_internal.h: [(n, [file, ...]), ...] in order."""
    lines = _read(root, INTERNAL).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("/* LAYERS")), None)
    if start is None:
        raise LayersError(f"{INTERNAL} has no /* LAYERS ... */ block")
    out = []
    for ln in lines[start + 1:]:
        if "*/" in ln:
            break
        m = re.match(r"^\s*\*\s+(\d+)\s+(\S.*?)\s*$", ln)
        if not m:
            raise LayersError(f"{INTERNAL}: not a layer line: {ln.strip()!r} "
                              "(expected ' *   <n> <file.c> <file.c> ...')")
        out.append((int(m.group(1)), m.group(2).split()))
    else:
        raise LayersError(f"{INTERNAL}: the LAYERS block never ends")
    if not out:
        raise LayersError(f"{INTERNAL}: the LAYERS block lists no layer")
    return out


def _sources(root):
    """libxt's source files: common/*.c and common/*.cu (not its tests)."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "common", "*.c")) +
                  glob.glob(os.path.join(root, "common", "*.cu")))


def _object(root, src):
    base = src[:-2] if src.endswith(".c") else src  # cuda.cu -> cuda.cu.o
    return os.path.join(root, "build", "common", base + ".o")


def _nm(obj):
    """(defined global symbols, undefined symbols) of one object."""
    res = subprocess.run(["nm", "-P", obj], capture_output=True, text=True)
    if res.returncode != 0:
        raise LayersError(f"nm {obj} failed: {res.stderr.strip()}")
    defined, undefined = set(), set()
    for ln in res.stdout.splitlines():
        parts = ln.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind.isupper() or kind == "u":
            defined.add(name)
    return defined, undefined


def _strip_comments(text):
    """The text with /* */ and // comments blanked (line breaks kept)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def _internal_declarations(root):
    """{xti_ name: heading file} as xt_internal.h declares them, and problems."""
    problems, where = [], {}
    heading = None
    in_comment = False
    for no, ln in enumerate(_read(root, INTERNAL).splitlines(), 1):
        m = HEADING.match(ln.strip())
        if m and not in_comment:
            heading = m.group(1)
            continue
        code = ""
        i = 0
        while i < len(ln):  # the line outside comments, comments spanning lines included
            if in_comment:
                j = ln.find("*/", i)
                if j < 0:
                    break
                in_comment, i = False, j + 2
            elif ln.startswith("/*", i):
                in_comment, i = True, i + 2
            elif ln.startswith("//", i):
                break
            else:
                code += ln[i]
                i += 1
        for name in re.findall(r"\b(xti_[A-Za-z0-9_]+)\s*[\(\[]", code):
            if name in where:
                if where[name] != heading:
                    problems.append(f"{INTERNAL}:{no}: {name} declared under /* {heading} */ "
                                    f"and again under /* {where[name]} */")
                continue
            if heading is None:
                problems.append(f"{INTERNAL}:{no}: {name} is declared before any "
                                "/* <file>.c */ heading")
            where[name] = heading
    return where, problems


def _declared_names(text):
    """Functions, types and macros a header declares (comments ignored)."""
    code = _strip_comments(text)
    names = set(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, re.M))
    names.discard("XT_H")
    flat = re.sub(r"^\s*#[^\n]*", " ", code, flags=re.M)
    # Statements at file level: a prototype is "<type> name(...);".
    for stmt in re.split(r"[;{}]", flat):
        m = re.match(r"\s*(?:extern\s+)?[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", stmt)
        if m and not stmt.strip().startswith(("typedef", "return", "if", "for", "while")):
            names.add(m.group(1))
    names.update(re.findall(r"}\s*([A-Za-z_]\w*)\s*;", flat))  # typedef struct {...} name;
    names.update(re.findall(r"typedef\s+[^;{}]*?\b([A-Za-z_]\w*)\s*;", flat))
    names.update(re.findall(r"typedef[^;{}]*\(\s*\*\s*([A-Za-z_]\w*)\s*\)", flat))
    return {n for n in names if n.lower().startswith("xt_")}


def check(root=ROOT):
    """Every problem found, as one line each; [] when libxt is in order."""
    problems = []
    try:
        order = layers(root)
    except (LayersError, OSError) as e:
        return [str(e)]

    # ---- the files and their layers
    layer_of = {}
    last = None
    for n, files in order:
        if last is not None and n <= last:
            problems.append(f"LAYERS: layer {n} comes after layer {last}")
        last = n
        for f in files:
            if f in layer_of:
                problems.append(f"LAYERS: {f} is listed twice")
            layer_of[f] = n
    sources = _sources(root)
    for f in sources:
        if f not in layer_of:
            problems.append(f"LAYERS: common/{f} is in no layer")
    for f in layer_of:
        if f not in sources:
            problems.append(f"LAYERS: {f} is listed but common/{f} does not exist")

    # ---- the objects
    objects = {}
    missing = []
    for f in sources:
        if f not in layer_of:
            continue
        obj = _object(root, f)
        if not os.path.exists(obj):
            if f.endswith(".c"):
                missing.append(os.path.relpath(obj, root))
            continue  # cuda.cu.o exists only after `make CUDA=1 cuda`
        if os.path.getmtime(obj) < os.path.getmtime(os.path.join(root, "common", f)):
            problems.append(f"{os.path.relpath(obj, root)} is older than common/{f}: "
                            "run `make build/common/libxt.a` first")
        objects[f] = obj
    if missing:
        problems.append(f"missing objects ({', '.join(missing)}): run "
                        "`make build/common/libxt.a` first (this script builds nothing)")
        return problems

    defined, used = {}, {}
    owner = {}
    for f, obj in objects.items():
        try:
            defined[f], used[f] = _nm(obj)
        except (LayersError, OSError) as e:
            problems.append(str(e))
            return problems
        for s in defined[f]:
            owner.setdefault(s, set()).add(f)

    # ---- references only to earlier layers
    for f in objects:
        for s in sorted(used[f]):
            for g in sorted(owner.get(s, ())):
                if g == f or s in defined[f]:
                    continue
                if layer_of[g] >= layer_of[f]:
                    problems.append(f"{f} (layer {layer_of[f]}) uses {s} of {g} "
                                    f"(layer {layer_of[g]}): a file may use only earlier layers")

    # ---- xt_internal.h maps every xti_ symbol to its file
    declared, decl_problems = _internal_declarations(root)
    problems += decl_problems
    internal = {s: fs for s, fs in owner.items() if s.startswith("xti_")}
    for s in sorted(internal):
        fs = sorted(internal[s])
        if len(fs) > 1:
            problems.append(f"{s} is defined in {' and '.join(fs)}")
        if s not in declared:
            problems.append(f"{s} (defined in {fs[0]}) is not declared in {INTERNAL}")
        elif declared[s] not in fs:
            problems.append(f"{s} is declared under /* {declared[s]} */ in {INTERNAL} but "
                            f"defined in {fs[0]}")
    for s in sorted(declared):  # every C file's object was read (cuda.cu.o may be absent)
        if s not in internal and not (declared[s] or "").endswith(".cu"):
            problems.append(f"{s} is declared under /* {declared[s]} */ in {INTERNAL} but "
                            "defined nowhere")

    # ---- no lecture in libxt
    for dirpath, dirs, files in os.walk(os.path.join(root, "common")):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except (UnicodeDecodeError, OSError):
                continue
            for no, ln in enumerate(text.splitlines(), 1):
                m = LECTURE.search(ln)
                if m:
                    problems.append(f"{os.path.relpath(path, root)}:{no}: names a lecture "
                                    f"({m.group(0)!r}): libxt knows no lecture")

    # ---- the exercise headers declare nothing of the harness header
    try:
        harness = _declared_names(_read(root, HARNESS_HEADER))
    except OSError:
        problems.append(f"{HARNESS_HEADER} is missing")
        harness = set()
    harness.discard("XT_HARNESS_H")
    for h in EXERCISE_HEADERS:
        try:
            both = harness & _declared_names(_read(root, h))
        except OSError:
            problems.append(f"{h} is missing")
            continue
        for n in sorted(both):
            problems.append(f"{h} declares {n}, which is the harness's ({HARNESS_HEADER})")
    return problems


# libxt's device layer: CUDA error checks, device selection and transfers, which DESIGN
# places in libxt whichever lectures have CUDA exercises.
DEVICE_LAYER = ("cuda.cu",)

# The main of the grader's resident programs (grader/resident.py), which every lecture's
# grade links by name (-u xt_resident_main), not through a symbol its objects use.
GRADER_MAIN = ("resident.c",)


def lectures_of(root):
    return sorted(os.path.basename(os.path.dirname(p))
                  for p in glob.glob(os.path.join(root, "grader", "lectures", "lc*", "__init__.py")))


def usage(root=ROOT, lectures=None):
    """{libxt source file: the set of lectures whose programs use it}, measured on the built
    objects (every lecture, or those named). A file with no object built is left out."""
    objs = {}
    for src in _sources(root):
        if os.path.exists(_object(root, src)):
            objs[src] = _nm(_object(root, src))
    owner = {sym: src for src, (defined, _) in objs.items() for sym in defined}
    used = {src: set() for src in objs}
    for lec in lectures or lectures_of(root):
        undefined = set()
        for d in (lec, os.path.join("solutions", lec), os.path.join("grader", "lectures", lec)):
            for o in glob.glob(os.path.join(root, "build", d, "**", "*.o"), recursive=True):
                undefined |= _nm(o)[1]
        todo = sorted({owner[sym] for sym in undefined if sym in owner})
        seen = set()
        while todo:
            src = todo.pop()
            if src in seen:
                continue
            seen.add(src)
            todo += [owner[sym] for sym in objs[src][1] if sym in owner]
        for src in seen:
            used[src].add(lec)
    return used


def single_lecture(used):
    """Problems: each libxt file that exactly one lecture uses (its kit's, not libxt's)."""
    return [f"common/{src} is used by {next(iter(lecs))} alone: it belongs in that lecture's "
            f"kit (grader/lectures/{next(iter(lecs))}/kit/)"
            for src, lecs in sorted(used.items())
            if len(lecs) == 1 and src not in DEVICE_LAYER + GRADER_MAIN]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=ROOT, help="the repository (default: this one)")
    args = ap.parse_args()
    try:
        for n, files in layers(args.root):
            print(f"layer {n}: {' '.join(files)}")
    except (LayersError, OSError) as e:
        print(f"layers: {e}")
    problems = check(args.root)
    try:
        used = usage(args.root)
        for src, lecs in sorted(used.items(), key=lambda kv: (len(kv[1]), kv[0])):
            print(f"{src:16} used by {len(lecs)}: {' '.join(sorted(lecs))}")
        problems += single_lecture(used)
    except LayersError as e:
        problems.append(str(e))
    for p in problems:
        print(f"PROBLEM {p}")
    print(f"{len(problems)} problem{'' if len(problems) == 1 else 's'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
