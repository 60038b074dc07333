"""A crash's story in the exercise's own lines: backtraces and the sites libxt's notes name
resolved to file:line (addr2line), glibc's heap messages, and AddressSanitizer's reports
rewritten as one headline (which block, how far past its end, where it was allocated).
"""

import os
import re
import subprocess


def own_prefixes(sources):
    """'file:' for each of the exercise's own files (a path, or its file and driver)."""
    return tuple(s + ":" for s in ((sources,) if isinstance(sources, str) else sources))


def short_backtrace(lines, binary, sources):
    """The exercise's own frames of a crash backtrace (its file's and its driver's),
    innermost first."""
    frames = []
    for line in lines:
        m = re.match(r"(.*)\((\w*)\+(0x[0-9a-f]+)\)", line)
        if not m or os.path.basename(m.group(1)) != os.path.basename(binary):
            continue
        for func, where in where_in_source(binary, m.group(2), m.group(3)):
            if where.startswith(own_prefixes(sources)):
                frames.append(f"{func}() at {where}")
    return frames


# A code address in a note, "{prefix|module(symbol+0xoff)}" (requests.c, site_token).
SITE = re.compile(r"\{([^{}|]*)\|([^{}]*)\}")


def resolve_sites(text, binary, sources):
    """A note with each code address as prefix + source:line where it lies in the exercise's
    own file, or without it where it does not (libxt's code, an unknown address)."""
    def one(m):
        frame = re.fullmatch(r"(.*)\((\w*)\+(0x[0-9a-f]+)\)", m.group(2))
        if frame and os.path.basename(frame.group(1)) == os.path.basename(binary):
            for _, where in where_in_source(binary, frame.group(2), frame.group(3)):
                if where.startswith(own_prefixes(sources)):
                    return m.group(1) + where
        return ""
    return SITE.sub(one, text)


def where_in_source(binary, func, off):
    """[(function, file:line)] for func+off in binary, inlined callers included."""
    try:
        base = 0
        if func:
            out = subprocess.run(["nm", binary], capture_output=True, text=True, timeout=10).stdout
            for line in out.splitlines():
                p = line.split()
                if len(p) == 3 and p[2] == func:
                    base = int(p[0], 16)
                    break
            else:
                return []
        addr = base + int(off, 16) - 1  # a return address points just after its call
        out = subprocess.run(["addr2line", "-f", "-i", "-C", "-e", binary, hex(addr)],
                             capture_output=True, text=True, timeout=10).stdout.splitlines()
        root = os.getcwd() + os.sep
        pairs = []
        for name, loc in zip(out[0::2], out[1::2]):
            if loc.startswith("??"):
                continue
            path, _, line = loc.partition(":")
            path = path[len(root):] if path.startswith(root) else path
            # A C++ name (the emulated device's build) demangled, without its parameters.
            pairs.append((name.strip().split("(")[0], f"{path}:{line.split()[0]}"))
        return pairs
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return []


# libxt's notes on a block's guard zones or freed data (common/mem.c).
ZONE_NOTE = re.compile(r"wrote (past the end|before the start|to the \d+-byte) ")


# What glibc prints before it aborts on a damaged heap.
GLIBC_HEAP = re.compile(r"((?:free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate|"
                        r"_int_free|_int_malloc|tcache_thread_shutdown)\(\): [^\n*]*|"
                        r"double free or corruption[^\n*]*|corrupted size vs\. prev_size[^\n*]*|"
                        r"corrupted double-linked list[^\n*]*)")


LIBC_ALLOCATOR = re.compile(r"libc\.so[^(]*\((malloc|free|calloc|realloc|cfree|posix_memalign|"
                            r"aligned_alloc|__libc_\w+)\+")


def heap_damage(crash, output):
    """For a SIGABRT raised by glibc's allocator finding its heap damaged: glibc's message
    ("free(): invalid next size (fast)"), or "" when it left none; otherwise None."""
    if "SIGABRT" not in crash.text:
        return None
    m = GLIBC_HEAP.search(output)
    if m:
        return m.group(1).strip().rstrip(":")
    if any(LIBC_ALLOCATOR.search(line) for line in crash.backtrace):
        return ""
    return None


def asan_in_output(output):
    """An AddressSanitizer report in a launch's output (one that no status file holds)."""
    lines = output.splitlines()
    start = next((i for i, ln in enumerate(lines) if "ERROR: AddressSanitizer" in ln), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("SUMMARY:")),
               len(lines))
    return lines[start:end]


def asan_frames(lines, binary):
    """[(function, file:line)] of each #N line of one stack in an AddressSanitizer report,
    paths relative to the tree; a frame it could not symbolize, from binary, by addr2line."""
    root = os.getcwd() + os.sep
    frames = []
    for line in lines:
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)(?::\d+)?$", line)
        if m:
            path = m.group(2)
            path = path[len(root):] if path.startswith(root) else path
            frames.append((m.group(1), f"{path}:{m.group(3)}"))
            continue
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+\s+(?:in \S+ )?\((\S+)\+(0x[0-9a-f]+)\)", line)
        if m and os.path.basename(m.group(1)) == os.path.basename(binary):
            frames += where_in_source(binary, "", m.group(2))
    return frames


def a_or_an(n):
    """The article before a number read aloud: "an 8-byte", "an 11-byte", "a 3-byte"."""
    digits = str(n)
    return "an" if digits.startswith("8") or re.fullmatch(r"1[18](\d{3})*", digits) else "a"


def asan_report(report, binary, sources, headline):
    """The CRASH lines for AddressSanitizer's report: what (the headline, with where the
    address lies), the lines that did it (the exercise's first), and where the memory was
    allocated (and freed)."""
    stacks, cur, about = {}, None, []
    for line in report:
        if re.match(r"\s*#\d+ ", line):
            if cur is not None:
                stacks.setdefault(cur, []).append(line)
            continue
        text = line.strip()
        if re.match(r"(READ|WRITE) of size", text) or "ERROR: AddressSanitizer" in text:
            cur = "access"
        elif re.search(r"(previously )?allocated by thread", text):
            cur = "allocated"
        elif "freed by thread" in text:
            cur = "freed"
        elif re.search(r"is located in stack of thread", text):
            cur = "frame"
        else:
            cur = None
            if text:
                about.append(text)

    def mine(frames):
        own = [f for f in frames if f[1].startswith(own_prefixes(sources))]
        project = [f for f in frames if not f[1].startswith(("/", "..")) and
                   os.path.isfile(f[1].rsplit(":", 1)[0])]
        return own, project

    def site(frames):
        own, project = mine(frames)
        # The allocators' own frames (xt_malloc_at, xt_alloc_at) say nothing: their caller does.
        project = [f for f in project if not f[1].startswith(("common/core_err.c:",
                                                              "common/mem.c:"))]
        f = (own or project or [None])[0]
        return f"{f[0]}() at {f[1]}" if f else ""

    lines = [headline]
    # libxt names the memory when it is its own (an xt_alloc block, a case's input or
    # output): "a WRITE of size 4 past the end of ..."; otherwise ASan's words say where.
    libxt_named = re.search(r"AddressSanitizer: (a READ|a WRITE|an access) ", headline)
    if not libxt_named and re.search(r", an? (READ|WRITE) of size", headline):
        words = next((say(m) for text in about for pattern, say in ASAN_PLACES
                      for m in [re.search(pattern, text)] if m), "")
        lines[0] += words
    own, project = mine(asan_frames(stacks.get("access", []), binary))
    chain = project[:project.index(own[-1]) + 1] if own else project[:2]
    if chain:
        lines.append("in " + " <- ".join(f"{f}() at {w}" for f, w in chain[-4:]))
    if not libxt_named:
        for what in ("allocated", "freed"):
            where = site(asan_frames(stacks.get(what, []), binary))
            if where:
                lines.append(f"the block was {what} in {where}")
    return lines


# Where AddressSanitizer says the bad access was, in the headline's words: (pattern of
# its report's description, the words for a match). The first that matches is taken.
ASAN_PLACES = [
    (r"is located (\d+) bytes to the (left|right) of (\d+)-byte region",
     lambda m: (f", {m[1]} bytes {'before the start' if m[2] == 'left' else 'past the end'} "
                f"of {a_or_an(m[3])} {m[3]}-byte block")),
    (r"is located (\d+) bytes inside of (\d+)-byte region",
     lambda m: f", byte {m[1]} of {a_or_an(m[2])} {m[2]}-byte block"),
    (r"\[(\d+), (\d+)\) '(\w+)'(?: \(line (\d+)\))? <== Memory access at offset \d+ (\w+)",
     lambda m: (f", {ASAN_SIDES.get(m[5], 'at')} the {int(m[2]) - int(m[1])}-byte local "
                f"variable '{m[3]}'" + (f" (declared at line {m[4]})" if m[4] else ""))),
    (r"of global variable '(\w+)' defined in '([^']+)'",
     lambda m: f", next to the global '{m[1]}' ({m[2]})"),
]


ASAN_SIDES = {"overflows": "past the end of", "underflows": "before the start of"}
