#!/usr/bin/env python3
"""DEVICE=emu: a .cu file as host C++ for libxt's emulated device (common/xt_cuda_emu.h).

    grader/cudaemu.py FILE.cu > FILE.emu.cpp

Each kernel launch

    kernel<<<grid, block, shmem, stream>>>(args);

becomes

    xt_emu_kernel(__FILE__, __LINE__, kernel, grid, block, shmem, stream)(args);

which queues every thread of the grid on the stream. Nothing else changes, and
a `#line` directive keeps the file's own name and line numbers: the compiler's
errors, a TODO's abort and a crash's frames point at the .cu file. The
Makefile runs this for every build/emu/ object (docs/setup.md, "The emulated
device").
"""

import re
import sys

# kernel<<<...>>>( : the configuration may hold parentheses and span lines, never ">>>".
LAUNCH = re.compile(r"\b([A-Za-z_]\w*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)


def rewrite(text, path):
    def launch(m):
        config = m.group(2)
        # A launch over several lines keeps its line count, so that the lines after it hold.
        flat = " ".join(config.split())
        return (f"xt_emu_kernel(__FILE__, __LINE__, {m.group(1)}, {flat})("
                + "\n" * config.count("\n"))
    return f'#line 1 "{path}"\n' + LAUNCH.sub(launch, text)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = sys.argv[1]
    with open(path) as f:
        text = f.read()
    sys.stdout.write(rewrite(text, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
