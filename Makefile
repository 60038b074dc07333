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

MPICC   ?= mpicc
NVCC    ?= nvcc
CUDA    ?= 0
BUILD   := build

CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror
XT_CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -Icommon -MMD -MP
# MPICH declares MPI_Waitall's statuses as an array, and gcc 11+ then takes
# MPI_STATUSES_IGNORE ((MPI_Status *)1) for a buffer overflow: a false alarm.
ifneq ($(findstring mpich,$(shell $(MPICC) -show 2>/dev/null)),)
XT_CFLAGS  += -Wno-stringop-overflow
endif
XT_LDFLAGS := -rdynamic
# OpenBLAS (libopenblas-dev) for xt_gemm; cblas.h comes with it.
LDLIBS  := -lopenblas -lpthread -lm

LIBXT     := $(BUILD)/common/libxt.a
LIBXT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
TESTS     := $(patsubst %.c,$(BUILD)/%,$(wildcard common/tests/*.c))
PROGRAMS  := $(patsubst %.c,$(BUILD)/%,$(wildcard lc*/*.c solutions/lc*/*.c))
# The lectures with a `make bench` driver, common/bench/<lecture>.c (see benchmarks).
BENCH_LECTURES := lc1_basic lc2_dp lc3_zero
BENCHES   := $(foreach l,$(BENCH_LECTURES),$(BUILD)/bench/solutions/$(l)/bench)

# ---------------------------------------------------------------- C programs

all: $(LIBXT) $(TESTS) $(PROGRAMS) $(BENCHES) $(if $(filter 1,$(CUDA)),cuda)

$(LIBXT): $(LIBXT_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	ar rcs $@ $^

# Any C file in the tree (exercise, solution, test, mutant under build/) builds
# to build/<path>.o, and links with libxt to build/<path>.
$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(XT_CFLAGS) -c $< -o $@

$(BUILD)/%: $(BUILD)/%.o $(LIBXT)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $< $(LIBXT) $(LDLIBS) -o $@

# ---------------------------------------------------------------------- CUDA

CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
MPI_CFLAGS = $(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -show -c 2>/dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
NVCC_FLAGS := -O2 -g -std=c++17 -Icommon -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX \
              -Xcompiler -Wall,-Wextra,-Werror -MMD -MP
LIBXT_CUDA := $(BUILD)/common/libxt_cuda.a
CUDA_TESTS := $(patsubst %.cu,$(BUILD)/%,$(wildcard common/tests/*.cu))
CUDA_PROGRAMS := $(patsubst %.cu,$(BUILD)/%,$(wildcard lc*/*.cu solutions/lc*/*.cu))

cuda: $(LIBXT_CUDA) $(CUDA_TESTS) $(CUDA_PROGRAMS)

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCC_FLAGS) $(MPI_CFLAGS) -c $< -o $@

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

# ---------------------------------------------------------------- benchmarks

# make bench LC=N (grader/bench.py) links the exercises' own objects with a
# driver per lecture, common/bench/<lecture>.c: objcopy -G keeps only the
# functions the driver calls global, so each file's main and helpers stay
# private and no algorithm code is copied.
#   lc1_basic (docs/lc1_basic.md, Bandwidth): the collectives. A .direct.o copy
#     renames the exercise's MPI_x calls to PMPI_x and its function to
#     xt_direct_<name>: the same code past libxt's counting wrappers, to
#     measure what they cost.
#   lc2_dp (docs/lc2_dp.md, Step time): the DDP steps. Their MPI_Testall and
#     MPI_Waitall become the driver's xt_bench_Testall/xt_bench_Waitall, which
#     pass through to MPI, or skip the progress calls, or trace each bucket.
#   lc3_zero (docs/lc3_zero.md, Memory and traffic): data-parallel Adam and
#     ZeRO stages 1, 2, 3; each stage's state struct stays private to its file.
# Per lecture: BENCH_SOURCES_<lecture> (files linked when present),
# BENCH_GLOBALS_<lecture> (functions kept), BENCH_RENAMES_<lecture>
# (old=new symbols), BENCH_DIRECT_<lecture> (1: also the .direct.o copies).
OBJCOPY ?= objcopy
NM      ?= nm
BENCH_SOURCES_lc1_basic := fun_ring_allreduce fun_allreduce_rd fun_gather fun_reduce_scatter \
                           fun_broadcast fun_all2all_scratch
BENCH_GLOBALS_lc1_basic := ring_allreduce allreduce_rd allgather_ring reduce_scatter_ring \
                           bcast_binomial alltoallv_scratch
BENCH_DIRECT_lc1_basic  := 1
BENCH_SOURCES_lc2_dp    := ddp_naive ddp_bucketed
BENCH_GLOBALS_lc2_dp    := ddp_naive_step plan_buckets ddp_bucketed_step
BENCH_RENAMES_lc2_dp    := MPI_Testall=xt_bench_Testall MPI_Waitall=xt_bench_Waitall
BENCH_SOURCES_lc3_zero  := distributed_adam adam_zero1 adam_zero2 adam_zero3
BENCH_GLOBALS_lc3_zero  := dp_adam_init dp_adam_step dp_adam_free zero1_init zero1_step \
                           zero1_free zero2_init zero2_step zero2_free zero3_init \
                           zero3_gather_layer zero3_step zero3_free
# The lecture of an object's stem: solutions/lc2_dp/ddp_naive -> lc2_dp.
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
# being solutions/lc1_basic, lc2_dp, a mutant's copy...; its last directory
# picks the driver.
.SECONDEXPANSION:
$(BUILD)/bench/%/bench: $(BUILD)/common/bench/$$(notdir $$*).o $$(call bench_objects,$$*) $(LIBXT)
	@mkdir -p $(@D)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $(filter %.o,$^) $(LIBXT) $(LDLIBS) -o $@

# Every object's header dependencies, at every depth objects live at (a
# mutant's is build/build/mutants/<name>/<lecture>/<exercise>.d): an object
# whose .d is not read is not rebuilt when a libxt header changes.
-include $(wildcard $(foreach d,* */* */*/* */*/*/* */*/*/*/* */*/*/*/*/*,$(BUILD)/$(d).d))

# ------------------------------------------------------------------ commands

# grader/setup.sh checks (and, where it may, installs) what a command needs,
# then prints the python3 that has NumPy.
ARGS_LC     = $(if $(LC),--lc $(LC))
ARGS_GRADE  = $(ARGS_LC) $(if $(filter 1,$(SOL)),--sol) $(if $(EX),--ex $(EX)) \
              $(if $(SEED),--seed $(SEED)) $(if $(JSON),--json $(JSON)) \
              $(if $(DEVICE),--device $(DEVICE)) $(if $(WATCHDOG),--watchdog $(WATCHDOG))

grade:
	@py=$$(grader/setup.sh) && "$$py" grader/grade.py $(ARGS_GRADE)

test:
	@py=$$(grader/setup.sh --test) && "$$py" grader/selftest.py $(if $(filter 1,$(CUDA)),--cuda)

deps:
	@grader/setup.sh --test >/dev/null && echo "all dependencies are present"

demo:
	@py=$$(grader/setup.sh) && "$$py" grader/demo.py $(if $(EX),--ex $(EX)) $(if $(NP),--np $(NP)) \
		$(if $(filter 0,$(SOL)),--student) $(if $(ARGS),--args="$(ARGS)") \
		$(if $(filter 1,$(TRACE)),--trace)

bench:
	@py=$$(grader/setup.sh) && "$$py" grader/bench.py $(ARGS_LC) $(if $(NP),--np $(NP)) \
		$(if $(filter 0,$(SOL)),--student) $(if $(ARGS),--args="$(ARGS)")

hint:
	@py=$$(grader/setup.sh) && "$$py" grader/hints.py $(EX) $(if $(N),--level $(N))

stubs:
	@py=$$(grader/setup.sh) && "$$py" grader/stubgen.py --write

format:
	clang-format -i common/*.[ch] common/*.cu common/tests/*.c lc*/*.c solutions/lc*/*.c

clean:
	rm -rf $(BUILD)

help:
	@echo "make                     build everything (CUDA=1: the CUDA parts too)"
	@echo "make grade LC=1          grade lecture 1's student tree (SOL=1: the solutions;"
	@echo "                         EX=name: one exercise; SEED=n: the same inputs again)"
	@echo "make test                the project's tests: libxt, stubs, solutions, mutants"
	@echo "make demo EX=name NP=4   run a solution in lecture mode (SOL=0: your own;"
	@echo "                         TRACE=1: a timeline for https://ui.perfetto.dev)"
	@echo "make bench LC=1 NP=4     bandwidth of the hand-written collectives beside the"
	@echo "                         MPI library's own (SOL=0: your own)"
	@echo "make bench LC=2          DDP step time, naive vs bucketed, np 1, 2, 4, and a"
	@echo "                         trace of the buckets"
	@echo "make bench LC=3          ZeRO stages 0-3 at np 1, 2, 4: each rank's memory by kind"
	@echo "                         and bytes per step, beside the formulas (LC=all: every"
	@echo "                         lecture; no LC: lecture 1's)"
	@echo "make hint EX=name        the next hint for that exercise (N=2: hint 2)"
	@echo "make deps                install what is missing (Open MPI, NumPy, a compiler)"
	@echo "make stubs               regenerate the student tree from solutions/"
	@echo "make format              clang-format every C file"
	@echo "make clean               remove build/"

.PHONY: all cuda grade test deps demo bench hint stubs format clean help
