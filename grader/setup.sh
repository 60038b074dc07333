#!/bin/sh
# grader/setup.sh: checks what xtrain-c needs, installs what is missing where
# it may, and prints the path of a python3 that imports NumPy.
#
#   grader/setup.sh           what `make grade` and `make demo` need
#   grader/setup.sh --test    also what `make test` uses (clang, clang-format, pyflakes,
#                             clangd, gdb)
#
# Installing needs apt-get and root (or sudo without a password). Otherwise
# it prints the one command that installs everything, and fails.
# XT_NO_INSTALL=1 only checks. XT_PYTHON=/path/to/python3 picks the python.
#
# The checks compile and run small programs (0.2 s, a fifth of a lecture's
# grade), so a full check that finds everything notes what it found in
# build/setup.txt: the python, and the file behind each thing checked (each
# command, mpi.h, cblas.h, libopenblas, NumPy, pyflakes). While every one of
# those files is still there, for the same PATH and XT_PYTHON, that note is
# the answer; a file gone (a package removed) means a full check again.
set -u

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

say() { printf '%s\n' "$*" >&2; }

note="${0%/*}/../build/setup.txt"
context="path=$PATH xt_python=${XT_PYTHON:-}"

# The python of the note, if it answers for this call; else nothing.
noted() {
    [ -r "$note" ] || return 1
    {
        IFS= read -r line && [ "$line" = "$context" ] || return 1
        IFS= read -r line || return 1
        [ "${line#test=}" -ge "$want_test" ] 2>/dev/null || return 1
        IFS= read -r py || return 1
        while IFS= read -r file; do
            [ -e "$file" ] || return 1
        done
    } < "$note"
    printf '%s\n' "$py"
}

if noted; then
    exit 0
fi

# A python3 that imports NumPy: pyenv or conda may put one without it first
# on PATH, so try the system one and every python3.X too.
find_python() {
    for py in ${XT_PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3 \
              python3.13 python3.12 python3.11 python3.10 python3.9 python3.8; do
        p=$(command -v "$py" 2>/dev/null) || continue
        if "$p" -c 'import numpy, sys; numpy.zeros(1); sys.exit(sys.version_info < (3, 8))' \
            >/dev/null 2>&1; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    return 1
}

# pyflakes as Debian's python3-pyflakes provides it: a module (the pyflakes3
# command is another package), run as `python3 -m pyflakes` by make test.
has_pyflakes() {
    for py in $python /usr/bin/python3; do
        "$py" -m pyflakes --version >/dev/null 2>&1 && return 0
    done
    return 1
}

missing=""
need() { # need COMMAND PACKAGE: COMMAND as PACKAGE installs it
    command -v "$1" >/dev/null 2>&1 || missing="$missing $2"
}

check() {
    missing=""
    need make make
    need cc gcc
    need g++ g++  # DEVICE=emu builds the CUDA exercises as C++
    need mpicc openmpi-bin  # Debian's openmpi-bin registers /usr/bin/mpicc and mpirun
    need mpirun openmpi-bin
    # mpi.h and libmpi.so, without which mpicc is there and compiles nothing.
    if command -v mpicc >/dev/null 2>&1; then
        printf '#include <mpi.h>\n' | mpicc -E -x c - >/dev/null 2>&1 ||
            missing="$missing libopenmpi-dev"
    else
        missing="$missing libopenmpi-dev"
    fi
    need nm binutils
    need addr2line binutils
    # Looked for once per check: a pyenv shim takes most of a second to answer.
    python=$(find_python) || { python=""; missing="$missing python3-numpy"; }
    # OpenBLAS: cblas.h, and the library every program links (-lopenblas). Without a
    # compiler nothing can say, so it is named with gcc: one install command for both.
    if command -v cc >/dev/null 2>&1; then
        printf '#include <cblas.h>\nint main(void) { return 0; }\n' |
            cc -x c - -lopenblas -o /dev/null >/dev/null 2>&1 ||
            missing="$missing libopenblas-dev"
    else
        missing="$missing libopenblas-dev"
    fi
    if [ "$want_test" = 1 ]; then
        need clang clang
        need clang-format clang-format
        has_pyflakes || missing="$missing python3-pyflakes"
        need clangd clangd
        need gdb gdb
    fi
    # One package once, in a stable order.
    missing=$(printf '%s\n' $missing | sort -u | tr '\n' ' ' | sed 's/ *$//')
}

check
if [ -n "$missing" ]; then
    if [ "${XT_NO_INSTALL:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            sudo=""
        elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo"
        else
            sudo="none"
        fi
        if [ "$sudo" != none ]; then
            say "setup: installing $missing"
            if ! { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
                     --no-install-recommends $missing >&2 ||
                   { $sudo apt-get update -q >&2 &&
                     DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
                       --no-install-recommends $missing >&2; }; }; then
                say "setup: apt-get could not install: $missing"
            fi
            check
        fi
    fi
fi
if [ -n "$missing" ]; then
    say "setup: missing packages: $missing"
    say "install them with:"
    say "    sudo apt-get install -y --no-install-recommends $missing"
    exit 1
fi

# The file a header comes from, as the compiler finds it.
header_of() { # header_of COMPILER HEADER
    printf '#include <%s>\n' "$2" | $1 -E -x c - 2>/dev/null |
        sed -n "s|^# [0-9]* \"\\(/[^\"]*/$2\\)\".*|\\1|p" | head -n 1
}

# Everything found, as files: the note of this check (see the top). Left unwritten where
# one cannot be named, so that the next call checks again in full.
found() {
    for c in make cc g++ mpicc mpirun nm addr2line; do command -v "$c"; done
    if [ "$want_test" = 1 ]; then
        for c in clang clang-format clangd gdb; do command -v "$c"; done
        for py in $python /usr/bin/python3; do
            "$py" -c 'import pyflakes; print(pyflakes.__file__)' 2>/dev/null && break
        done
    fi
    header_of mpicc mpi.h
    header_of cc cblas.h
    cc -print-file-name=libopenblas.so
    "$python" -c 'import numpy; print(numpy.__file__)'
}
if files=$(found) && ! printf '%s\n' "$files" | grep -qv '^/'; then
    mkdir -p "${note%/*}" 2>/dev/null &&
        printf '%s\ntest=%s\n%s\n%s\n' "$context" "$want_test" "$python" "$files" \
            > "$note.$$" 2>/dev/null && mv -f "$note.$$" "$note" 2>/dev/null
    rm -f "$note.$$" 2>/dev/null
fi
printf '%s\n' "$python"
