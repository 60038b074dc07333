# xtrain-c: one entry point. `make help` lists the targets.
#
#   make                    build libxt, its tests, the student tree and the solutions
#   make grade LC=1         build lecture 1's student tree and grade it
#   make test               the project's own test suite (what CI runs)
#
# Builds are incremental: every object has its header dependencies (-MMD).

SHELL := /bin/bash
.DEFAULT_GOAL := all
.SUFFIXES:
.SECONDARY:
.DELETE_ON_ERROR:

# The grader's Python keeps its modules compiled (grader/**/__pycache__, which git
# ignores): where the environment sets PYTHONDONTWRITEBYTECODE, as some images do, every
# grade would compile them again (0.06 s, a tenth of a small lecture's grade).
unexport PYTHONDONTWRITEBYTECODE

MPICC   ?= mpicc
NVCC    ?= nvcc
CUDA    ?= 0
BUILD   := build

CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror
XT_CFLAGS   = -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -Icommon -MMD -MP
# MPICH declares MPI_Waitall's statuses as an array, and gcc 11+ then takes
# MPI_STATUSES_IGNORE ((MPI_Status *)1) for a buffer overflow: a false alarm.
# Asked of mpicc at the first compile, once (the value replaces the question),
# not while make reads this file: on a fresh machine mpicc is not there yet.
MPICH_FLAGS = $(eval MPICH_FLAGS := $(if $(findstring mpich,$(shell $(MPICC) -show 2>/dev/null)),\
                -Wno-stringop-overflow))$(MPICH_FLAGS)
XT_CFLAGS  += $(MPICH_FLAGS)
XT_LDFLAGS := -rdynamic
# SAN=1: the same programs built with AddressSanitizer, into a tree of their
# own (build/san/), so that neither build undoes the other and both stay
# incremental. make grade SAN=1 and make demo SAN=1 run them (docs/debugging.md).
ifeq ($(SAN),1)
BUILD      := build/san
SAN_FLAGS  := -fsanitize=address -fno-omit-frame-pointer -g
XT_CFLAGS  += $(SAN_FLAGS)
XT_LDFLAGS += $(SAN_FLAGS)
endif
# COV=1: the same programs built for gcov, into build/cov/: what the grade's cases
# execute of each solution (grader/coverage.py, a section of make test).
ifeq ($(COV),1)
BUILD      := build/cov
XT_CFLAGS  += --coverage -O0
XT_LDFLAGS += --coverage
endif
# OpenBLAS (libopenblas-dev) for xt_gemm; cblas.h comes with it.
LDLIBS  := -lopenblas -lpthread -lm

LIBXT     := $(BUILD)/common/libxt.a
LIBXT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
TESTS     := $(patsubst %.c,$(BUILD)/%,$(wildcard common/tests/*.c))
# A kit's own tests (grader/lectures/<lecture>/kit/tests/*.c), linked with its kit.
KIT_TESTS := $(patsubst %.c,$(BUILD)/%,$(wildcard grader/lectures/*/kit/tests/*.c))
# The lectures, found by looking: every package grader/lectures/lc<N>_<name>/.
LECTURES  := $(sort $(patsubst grader/lectures/%/__init__.py,%,$(wildcard grader/lectures/lc*/__init__.py)))
PROGRAMS  := $(patsubst %.c,$(BUILD)/%,$(foreach l,$(LECTURES),$(wildcard $(l)/*.c solutions/$(l)/*.c)))
# The lectures with a `make bench` driver, grader/lectures/<lecture>/bench.c (see benchmarks).
BENCH_LECTURES := $(patsubst grader/lectures/%/bench.c,%,$(wildcard $(foreach l,$(LECTURES),grader/lectures/$(l)/bench.c)))
BENCHES   := $(foreach l,$(BENCH_LECTURES),$(BUILD)/bench/solutions/$(l)/bench)
PYTHON    ?= python3
# The editors' compile_commands.json, brought up to date by every build of the main
# tree (see "For editors" below); its stamp is what rules depend on.
COMPDB_STAMP := $(BUILD)/compdb.mk
COMPDB       := $(if $(filter build,$(BUILD)),$(COMPDB_STAMP))

# Nothing in this file runs while make reads it but the shell's own `command -v`,
# find and mpicc's probe above, which are all allowed to find nothing: `make grade`
# on a machine with only git and make reads it, then grader/setup.sh installs the
# rest. Whatever needs Python or the compilers runs in a recipe, after that.

# ---------------------------------------------------------------- C programs

all: $(LIBXT) $(TESTS) $(KIT_TESTS) $(PROGRAMS) $(BENCHES) $(COMPDB) $(if $(filter 1,$(CUDA)),cuda)

# A plain `make` (or make emu, make cuda) builds without installing anything first:
# where mpicc is missing, say what installs it rather than fail at the first compile.
ifneq ($(filter all emu cuda,$(or $(MAKECMDGOALS),all)),)
ifeq ($(shell command -v $(firstword $(MPICC))),)
$(error $(firstword $(MPICC)) is not installed: `make deps` installs what the course needs \
  (Open MPI, NumPy, OpenBLAS, a compiler), or prints the apt-get command that would)
endif
endif

$(LIBXT): $(LIBXT_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# Any C file in the tree (exercise, solution, test, mutant under build/) builds
# to build/<path>.o, and links with libxt to build/<path>. A lecture may have a
# kit, the code that only its programs share (docs/instructors.md, "A lecture's
# kit"): its sources grader/lectures/<lecture>/kit/*.c and their header
# solutions/<lecture>/kit.h, which the stub generator copies beside the
# student's files. A program's lecture is the name of its directory (lcN_x/,
# solutions/lcN_x/, a mutant's .../lcN_x/, the kit's own lcN_x/kit/): the
# kit's header directory is on its include path, and it links the kit's objects.
lecture_of  = $(notdir $(patsubst %/,%,$(patsubst %/kit/,%/,$(patsubst %/kit/tests/,%/,$(dir $(1))))))
kit_include = $(addprefix -I,$(patsubst %/,%,$(dir $(wildcard solutions/$(1)/kit.h))))
# A kit may build on an earlier lecture's answer (lecture 5's tensor-parallel stage on
# lecture 4's decoder): its manifest declares the lectures it uses, on one line
# USES = ["lcN_x", ...]. The kit's own files then see their solutions (the include path),
# and the lecture's programs link their kits too. Read once, as lecture:used pairs.
USES_PAIRS := $(shell awk -F'"' '/^USES = \[/ { split(FILENAME, p, "/"); \
                for (i = 2; i < NF; i += 2) print p[3] ":" $$i }' grader/lectures/*/__init__.py 2>/dev/null)
uses_of     = $(patsubst $(1):%,%,$(filter $(1):%,$(USES_PAIRS)))
uses_include = $(if $(findstring /kit/,$(1)),$(foreach u,$(call uses_of,$(call lecture_of,$(1))),-Isolutions/$(u)))
kit_objs    = $(patsubst %.c,$(BUILD)/%.o,$(wildcard $(foreach l,$(1) $(call uses_of,$(1)),grader/lectures/$(l)/kit/*.c)))
lecture_obj = $(call kit_objs,$(call lecture_of,$(1)))

# An exercise's driver (the grader's cases, the demo and main) is not in the
# student's file: grader/lectures/<lecture>/drivers/<file> is compiled as one
# unit with it, after it (-include), so it sees every type and static function
# the file defines. A file without a driver (libxt, a kit, a test) compiles alone.
# A tree of its own (a mutant's, build/mutants/<name>/) may hold its own driver.
tree_of     = $(patsubst %$(call lecture_of,$(1))/$(notdir $(1)),%,$(1))
driver_path = grader/lectures/$(call lecture_of,$(1))/drivers/$(notdir $(1))
driver_of   = $(firstword $(wildcard $(call tree_of,$(1))$(call driver_path,$(1)) $(call driver_path,$(1))))
# -include names the file ./<path>: the prefix map keeps __FILE__ and the debug
# information at <path>, and DWARF 4 keeps addr2line (binutils 2.40) from giving
# the exercise's lines to the driver, whose file has the same name.
UNIT_FLAGS  = -gdwarf-4 -ffile-prefix-map=./=
comma      := ,
one_unit    = $(if $(call driver_of,$(1)),$(UNIT_FLAGS) -include $(1) -c $(call driver_of,$(1)),-c $(1))

.SECONDEXPANSION:
$(BUILD)/%.o: %.c $$(call driver_of,$$*.c)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(XT_CFLAGS) $(call kit_include,$(call lecture_of,$<)) $(call uses_include,$<) \
	  $(call one_unit,$<) -o $@

$(BUILD)/%: $(BUILD)/%.o $$(call lecture_obj,$$*) $(LIBXT) | $(COMPDB)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $(filter %.o,$^) $(LIBXT) $(LDLIBS) -o $@

# For editors (clangd, VS Code, Vim): compile_commands.json, how each C file
# compiles, from these flags (grader/compdb.py). Every build brings it up to date
# (every program has the stamp below as an order-only prerequisite, as has `all`):
# the stamp is remade when a directory of C files gains or loses one, or when the
# database is missing. Only the main build writes it (make test's clang build and
# SAN=1's leave it alone). Not for git.
COMPDB_SOURCES := $(wildcard common/*.c common/tests/*.c) \
                  $(foreach l,$(LECTURES),$(wildcard $(l)/*.c solutions/$(l)/*.c grader/lectures/$(l)/*.c \
                    grader/lectures/$(l)/kit/*.c grader/lectures/$(l)/kit/tests/*.c \
                    grader/lectures/$(l)/drivers/*.c))
$(COMPDB_STAMP): grader/compdb.py Makefile grader/lectures/ $(sort $(dir $(COMPDB_SOURCES))) \
                 $(if $(wildcard compile_commands.json),,compdb-missing)
	@mkdir -p $(@D)
	@tmp=compile_commands.json.$$$$ && \
	  $(PYTHON) grader/compdb.py --mpicc "$(MPICC)" --flags "$(CFLAGS) $(XT_CFLAGS)" \
	    $(COMPDB_SOURCES) > $$tmp && mv $$tmp compile_commands.json
	@echo "# compile_commands.json is up to date (grader/compdb.py)" > $@

# ---------------------------------------------------------------------- CUDA

CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
MPI_CFLAGS = $(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -show -c 2>/dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
NVCC_FLAGS := -O2 -g -std=c++17 -Icommon -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX \
              -Xcompiler -Wall,-Wextra,-Werror -MMD -MP
LIBXT_CUDA := $(BUILD)/common/libxt_cuda.a
CUDA_TESTS := $(patsubst %.cu,$(BUILD)/%,$(wildcard common/tests/*.cu))
CUDA_PROGRAMS := $(patsubst %.cu,$(BUILD)/%,$(foreach l,$(LECTURES),$(wildcard $(l)/*.cu solutions/$(l)/*.cu)))

cuda: $(LIBXT_CUDA) $(CUDA_TESTS) $(CUDA_PROGRAMS)

$(BUILD)/%.cu.o: %.cu $$(call driver_of,$$*.cu)
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(MPI_CFLAGS) $(subst $(UNIT_FLAGS),-Xcompiler -gdwarf-4$(comma)-ffile-prefix-map=./=,$(call one_unit,$<)) -o $@

$(LIBXT_CUDA): $(BUILD)/common/cuda.cu.o
	@rm -f $@
	ar rcs $@ $^

CUDA_LINK = $(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $< $(LIBXT_CUDA) $(LIBXT) -L$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++ $(LDLIBS) -o $@

$(CUDA_TESTS) $(CUDA_PROGRAMS): $(BUILD)/%: $(BUILD)/%.cu.o $(LIBXT_CUDA) $(LIBXT)
	$(CUDA_LINK)

# Any other .cu program (a mutant under build/, say) links the same way; make
# takes this rule where no .c file of that name exists.
$(BUILD)/%: $(BUILD)/%.cu.o $(LIBXT_CUDA) $(LIBXT)
	$(CUDA_LINK)

# ------------------------------------------------- the emulated device (DEVICE=emu)

# A .cu file built as host C++ against libxt's emulated CUDA device
# (common/xt_cuda_emu.h, common/cuda_emu.cpp), for machines without a GPU:
# grader/cudaemu.py rewrites its kernel launches into calls, build/emu/<path>.emu.cpp,
# compiled with XT_CUDA_EMU and linked with libxt's CUDA helpers built the same way.
# make grade DEVICE=emu builds build/emu/<path> for each .cu exercise; make emu builds
# them all (docs/setup.md, "The emulated device").
EMU       := build/emu
EMU_CXX    = $(MPICC) -x c++ -std=c++17
EMU_FLAGS := -DXT_CUDA_EMU -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Icommon $(WARN) -MMD -MP
EMU_LIB   := $(EMU)/common/cuda.o $(EMU)/common/cuda_emu.o
EMU_PROGRAMS := $(patsubst %.cu,$(EMU)/%,$(wildcard common/tests/*.cu common/tests/emu/*.cu) \
                  $(foreach l,$(LECTURES),$(wildcard $(l)/*.cu solutions/$(l)/*.cu)))

emu: $(EMU_PROGRAMS)

$(EMU)/%.emu.cpp: %.cu grader/cudaemu.py
	@mkdir -p $(@D)
	@$(PYTHON) grader/cudaemu.py $< > $@.tmp && mv $@.tmp $@

$(EMU)/common/cuda_emu.o: common/cuda_emu.cpp
	@mkdir -p $(@D)
	$(EMU_CXX) $(CFLAGS) $(EMU_FLAGS) -c $< -o $@

# An exercise's driver is rewritten too, and compiled as one unit with it.
emu_driver = $(patsubst %.cu,$(EMU)/%.emu.cpp,$(call driver_of,$(1).cu))

$(EMU)/%.o: $(EMU)/%.emu.cpp $$(call emu_driver,$$*)
	$(EMU_CXX) $(CFLAGS) $(EMU_FLAGS) $(call kit_include,$(call lecture_of,$*)) \
	  $(if $(call emu_driver,$*),$(UNIT_FLAGS) -include $< -c $(call emu_driver,$*),-c $<) -o $@

$(EMU)/%: $(EMU)/%.o $$(call kit_objs,$$(call lecture_of,$$*)) $(EMU_LIB) $(LIBXT)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $(filter-out $(EMU_LIB),$(filter %.o,$^)) $(EMU_LIB) $(LIBXT) -lstdc++ \
	  $(LDLIBS) -o $@

# ---------------------------------------------------------------- benchmarks

# make bench LC=N (grader/bench.py) links the exercises' own objects with the
# lecture's driver, grader/lectures/<lecture>/bench.c: objcopy -G keeps only
# the functions the driver calls global, so each file's main and helpers stay
# private and no algorithm code is copied. What each lecture links is written
# once, in make's own syntax, in grader/lectures/<lecture>/bench.mk (which
# grader/benchlib.py reads too): BENCH_SOURCES (the exercise files linked when
# present), BENCH_FUNCTIONS (the functions kept), BENCH_RENAMES (old=new symbols)
# and BENCH_DIRECT (1: also a .direct.o copy of each, its MPI_x calls renamed
# PMPI_x and its functions xt_direct_<name>: the same code past libxt's counting
# wrappers). Each is kept per lecture as BENCH_SOURCES_<lecture> and so on.
OBJCOPY ?= objcopy
NM      ?= nm
define bench_link
BENCH_SOURCES :=
BENCH_FUNCTIONS :=
BENCH_RENAMES :=
BENCH_DIRECT :=
include grader/lectures/$(1)/bench.mk
BENCH_SOURCES_$(1) := $$(BENCH_SOURCES)
BENCH_GLOBALS_$(1) := $$(BENCH_FUNCTIONS)
BENCH_RENAMES_$(1) := $$(BENCH_RENAMES)
BENCH_DIRECT_$(1)  := $$(BENCH_DIRECT)
endef
$(foreach l,$(BENCH_LECTURES),$(eval $(call bench_link,$(l))))
# The lecture of an object's stem: solutions/lcN_x/ex -> lcN_x.
bench_lecture = $(notdir $(patsubst %/,%,$(dir $(1))))
# The objects of the exercise files that exist in tree $(1) (its last directory
# names the lecture); a missing one is skipped.
bench_objects = $(foreach s,$(BENCH_SOURCES_$(notdir $(1))),$(if $(wildcard $(1)/$(s).c),\
                  $(BUILD)/bench/$(1)/$(s).o \
                  $(if $(BENCH_DIRECT_$(notdir $(1))),$(BUILD)/bench/$(1)/$(s).direct.o)))

$(BUILD)/bench/%.direct.o: $(BUILD)/%.o
	@mkdir -p $(@D)
	$(OBJCOPY) $(foreach f,$(BENCH_GLOBALS_$(call bench_lecture,$*)),\
	             --redefine-sym $(f)=xt_direct_$(f) -G xt_direct_$(f)) \
	  $$($(NM) -u $< | awk '$$2 ~ /^MPI_[A-Z][a-z]/ { printf "--redefine-sym %s=P%s ", $$2, $$2 }') \
	  $< $@

$(BUILD)/bench/%.o: $(BUILD)/%.o
	@mkdir -p $(@D)
	$(OBJCOPY) $(foreach f,$(BENCH_GLOBALS_$(call bench_lecture,$*)),-G $(f)) \
	  $(foreach r,$(BENCH_RENAMES_$(call bench_lecture,$*)),--redefine-sym $(r)) $< $@

# The bench of any tree of exercise files: build/bench/<tree>/bench, the tree
# being solutions/lcN_x, lcN_x, a mutant's copy...; its last directory
# picks the driver.
$(BUILD)/bench/%/bench: $(BUILD)/grader/lectures/$$(notdir $$*)/bench.o $$(call bench_objects,$$*) \
                        $$(call kit_objs,$$(notdir $$*)) $(LIBXT)
	@mkdir -p $(@D)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $(filter %.o,$^) $(LIBXT) $(LDLIBS) -o $@

# ---------------------------------------------------------- resident programs

# make grade runs a lecture's exercises in one launch (common/resident.c,
# grader/resident.py): build/resident/<dir>/<lecture>/resident links each
# exercise's own object with its main renamed xt_entry_<exercise> and every
# other symbol made local (objcopy -G), so that two files' helpers of one name
# stay apart, with the lecture's kit; libxt's xt_resident_main is its main. The
# objects it links are those the grader lists in objects.txt beside it, each as
# its program's path under build/ (solutions/<lecture>/<exercise>). A mutant's
# (build/mutants/<mutant>/...) is entered as xt_entry_<mutant>: the mutants of
# one exercise share a resident program (grader/mutants.py).
resident_objs = $(addprefix $(BUILD)/resident/,$(addsuffix .o,\
                  $(file <$(BUILD)/resident/$(1)/objects.txt)))

$(BUILD)/resident/%.o: $(BUILD)/%.o
	@mkdir -p $(@D)
	$(OBJCOPY) --redefine-sym main=xt_entry_$(notdir $*) -G xt_entry_$(notdir $*) $< $@

$(BUILD)/resident/build/mutants/%.o: $(BUILD)/build/mutants/%.o
	@mkdir -p $(@D)
	$(OBJCOPY) --redefine-sym main=xt_entry_$(firstword $(subst /, ,$*)) \
	  -G xt_entry_$(firstword $(subst /, ,$*)) $< $@

$(BUILD)/resident/%/resident: $(BUILD)/resident/%/objects.txt $$(call resident_objs,$$*) \
                              $$(call kit_objs,$$(notdir $$*)) $(LIBXT)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) -Wl,-u,xt_resident_main -Wl,--defsym=main=xt_resident_main \
	  $(filter %.o,$^) $(LIBXT) $(LDLIBS) -o $@

# Every object's header dependencies, at every depth objects live at (a
# mutant's is build/build/mutants/<name>/<lecture>/<exercise>.d): an object
# whose .d is not read is not rebuilt when a libxt header changes. Reading them
# is most of what make spends on a build with nothing to do (0.2 s for a built
# tree), so make reads those its goals can need:
#   - none when every goal is a command (make grade, make test, ...): those
#     call make again for what they build;
#   - for goals that are files under the build tree, libxt's (every path
#     holding /common/) and those of the lectures the goals' paths name, with
#     the lectures those use (every path holding /<lecture>/): a program, its
#     objects, its kit's, a resident program's, a mutant's, a bench's;
#   - else (make, make emu, a goal elsewhere) all of them.
# find skips the directories that hold no objects of this tree: the grading
# and test runs (thousands of case files), the other build trees (SAN=1's,
# COV=1's, make test's clang build), the mutants' sources and the resident
# programs' renamed copies; and it reads a mutant's tree only when a goal lies
# in it: the .d files of hundreds of mutants would cost every make half a second.
COMMAND_GOALS := grade test test-cluster debug deps demo bench bench-grade lectures readme \
                 hint drill drills stubs format clean help
FILE_GOALS    := $(filter-out $(COMMAND_GOALS),$(MAKECMDGOALS))
GOAL_LECTURES := $(if $(FILE_GOALS),$(if $(filter-out $(BUILD)/%,$(FILE_GOALS)),,\
                   $(sort $(filter $(LECTURES),$(subst /, ,$(FILE_GOALS))))))
GOAL_LECTURES += $(foreach l,$(GOAL_LECTURES),$(call uses_of,$(l)))
GOAL_MUTANTS := $(sort $(foreach g,$(MAKECMDGOALS),$(if $(findstring $(BUILD)/build/mutants/,$(g)),\
                  $(firstword $(subst /, ,$(lastword $(subst $(BUILD)/build/mutants/, ,$(g))))))))
OTHER_TREES  := $(filter-out $(BUILD),build/san build/cov build/clang)
# The .d files under the build tree whose path holds one of $(1) (all for none).
dep_files     = $(shell find $(BUILD) \( $(foreach d,grade selftest trace hints build/mutants mutants \
                  resident,-path $(BUILD)/$(d) -o) $(foreach d,$(OTHER_TREES),-path $(d) -o) -false \) \
                  -prune -o -name '*.d' $(if $(1),\( $(foreach k,$(1),-path '*/$(k)/*' -o) -false \)) \
                  -print 2>/dev/null) \
                $(if $(GOAL_MUTANTS),$(shell find $(addprefix $(BUILD)/build/mutants/,$(GOAL_MUTANTS)) \
                  -name '*.d' $(if $(1),\( $(foreach k,$(1),-path '*/$(k)/*' -o) -false \)) -print 2>/dev/null))
ifneq ($(or $(FILE_GOALS),$(if $(MAKECMDGOALS),,all)),)
ifneq ($(strip $(GOAL_LECTURES)),)
-include $(call dep_files,common $(GOAL_LECTURES))
else ifeq ($(filter-out $(BUILD)/%,$(FILE_GOALS)),)
-include $(call dep_files,common)
else
-include $(call dep_files)
endif
endif

# ------------------------------------------------------------------ commands

# grader/setup.sh checks (and, where it may, installs) what a command needs,
# then prints the python3 that has NumPy.
ARGS_LC     = $(if $(LC),--lc $(LC))
ARGS_GRADE  = $(ARGS_LC) $(if $(filter 1,$(SOL)),--sol) $(if $(EX),--ex $(EX)) \
              $(if $(SEED),--seed $(SEED)) $(if $(CASE),--case $(CASE)) $(if $(JSON),--json $(JSON)) \
              $(if $(DEVICE),--device $(DEVICE)) $(if $(WATCHDOG),--watchdog $(WATCHDOG)) \
              $(if $(filter 1,$(VERBOSE)),--verbose) $(if $(filter 1,$(SAN)),--san)

grade:
	@py=$$(grader/setup.sh) && "$$py" grader/grade.py $(ARGS_GRADE)

test:
	@py=$$(grader/setup.sh --test) && "$$py" grader/selftest.py $(if $(filter 1,$(CUDA)),--cuda)

# One case again, rank RANK waiting for gdb (grader/debug.py).
debug:
	@py=$$(grader/setup.sh) && "$$py" grader/debug.py $(ARGS_LC) $(if $(EX),--ex $(EX)) \
		$(if $(CASE),--case $(CASE)) $(if $(RANK),--rank $(RANK)) $(if $(filter 1,$(SOL)),--sol) \
		$(if $(SEED),--seed $(SEED)) $(if $(filter 1,$(SAN)),--san)

deps:
	@grader/setup.sh --test >/dev/null && echo "all dependencies are present"

demo:
	@py=$$(grader/setup.sh) && "$$py" grader/demo.py $(if $(EX),--ex $(EX)) $(if $(NP),--np $(NP)) \
		$(if $(filter 0,$(SOL)),--student) $(if $(ARGS),--args="$(ARGS)") \
		$(if $(filter 1,$(TRACE)),--trace) $(if $(filter 1,$(SAN)),--san) \
		$(if $(DEVICE),--device $(DEVICE))

bench:
	@py=$$(grader/setup.sh) && "$$py" grader/bench.py $(ARGS_LC) $(if $(NP),--np $(NP)) \
		$(if $(filter 0,$(SOL)),--student) $(if $(ARGS),--args="$(ARGS)")

# The grader's own bench: where a grade's seconds go, per lecture (grader/gradebench.py).
bench-grade:
	@py=$$(grader/setup.sh) && "$$py" grader/gradebench.py $(ARGS_LC) $(if $(EX),--ex $(EX)) \
		$(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(VS),--vs $(VS)) $(if $(SEED),--seed $(SEED))

# Two nodes on this machine, a hostfile and a Slurm allocation, each graded through
# (grader/testcluster.py: root; installs slurm-wlm and munge where missing).
test-cluster:
	@py=$$(grader/setup.sh) && "$$py" grader/testcluster.py

lectures:
	@py=$$(grader/setup.sh) && "$$py" grader/grade.py --list

readme:
	@py=$$(grader/setup.sh) && "$$py" grader/grade.py --readme README.md

hint:
	@py=$$(grader/setup.sh) && "$$py" grader/hints.py $(EX) $(if $(N),--level $(N))

# make drill EX=name: that exercise against the clock (grader/drill.py); the
# history lives in .drills/, which make clean keeps.
drill:
	@py=$$(grader/setup.sh) && "$$py" grader/drill.py $(if $(EX),--ex $(EX)) $(if $(FN),--fn $(FN)) \
		$(if $(LC),--lc $(LC)) $(if $(filter 1,$(STOP)),--stop)

drills:
	@py=$$(grader/setup.sh) && "$$py" grader/drill.py --history

stubs:
	@py=$$(grader/setup.sh) && "$$py" grader/stubgen.py --write

format:
	clang-format -i common/*.[ch] common/*.cu common/*.cpp common/tests/*.c common/tests/*.cu \
		common/tests/emu/*.cu common/tests/*.h grader/lectures/*/*.[ch] \
		$(wildcard grader/lectures/*/kit/*.[ch] grader/lectures/*/kit/tests/*.c grader/lectures/*/drivers/*.c*) \
		lc*/*.c lc*/*.cu solutions/lc*/*.c solutions/lc*/*.cu $(wildcard solutions/lc*/*.h)

clean:
	@if [ -L $(BUILD)/grade ]; then rm -rf "$$(dirname "$$(readlink $(BUILD)/grade)")"; fi
	rm -rf $(BUILD)

help:
	@echo "make                     build everything (CUDA=1: the CUDA parts too)"
	@echo "make emu                 build the CUDA programs for the emulated device (build/emu/)"
	@echo "make grade LC=1          grade lecture 1's student tree (SOL=1: the solutions;"
	@echo "                         EX=name: one exercise; SEED=n: the same inputs again;"
	@echo "                         CASE=i: only case i of that, as the report numbers it;"
	@echo "                         VERBOSE=1: every failing case; JSON=file: every case;"
	@echo "                         SAN=1: with AddressSanitizer, see docs/debugging.md;"
	@echo "                         DEVICE=cuda: the CUDA exercises on a GPU, DEVICE=emu: on"
	@echo "                         the emulated device, docs/setup.md)"
	@echo "make debug EX=name       the first failing case of the last grade again, rank 0"
	@echo "                         waiting for gdb (CASE=i, RANK=r, SOL=1: others;"
	@echo "                         SAN=1: the AddressSanitizer build)"
	@echo "make test                the project's tests: libxt, stubs, solutions, mutants"
	@echo "make demo EX=name NP=4   run a solution in lecture mode (SOL=0: your own;"
	@echo "                         TRACE=1: a timeline for https://ui.perfetto.dev;"
	@echo "                         SAN=1: with AddressSanitizer)"
	@echo "make bench LC=N          lecture N's benchmark, beside formulas or the MPI library"
	@echo "make bench-grade [LC=N]  where a grade's seconds go, per lecture [VS=DIR ROUNDS=3]"
	@echo "make test-cluster        a hostfile and a Slurm allocation of two nodes here (root)"
	@echo "                         (LC=all: every lecture that has one; no LC: the first;"
	@echo "                         ARGS=--help: the options; SOL=0: your own files)"
	@echo "make lectures            every lecture found, its exercises, points and page"
	@echo "make readme              rewrite the README's table of lectures from the manifests"
	@echo "make hint EX=name        the next hint for that exercise (N=2: hint 2)"
	@echo "make drill EX=name       interview practice: a fresh stub of that exercise (yours"
	@echo "                         kept aside) and a clock, until make grade gives full marks"
	@echo "                         (FN=fn: one function of its file; LC=N: an exercise of"
	@echo "                         lecture N not yet drilled; STOP=1: give up, yours back)"
	@echo "make drills              the drills' history: best and latest time per exercise"
	@echo "make deps                install what is missing (Open MPI, NumPy, a compiler)"
	@echo "make stubs               regenerate the student tree from solutions/"
	@echo "make format              clang-format every C file"
	@echo "make clean               remove build/"

.PHONY: compdb-missing all cuda emu grade test test-cluster debug deps demo bench bench-grade lectures readme hint drill drills stubs \
        format clean help
