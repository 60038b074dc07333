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
LDLIBS  := -lpthread -lm

LIBXT     := $(BUILD)/common/libxt.a
LIBXT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
TESTS     := $(patsubst %.c,$(BUILD)/%,$(wildcard common/tests/*.c))
PROGRAMS  := $(patsubst %.c,$(BUILD)/%,$(wildcard lc*/*.c solutions/lc*/*.c))

# ---------------------------------------------------------------- C programs

all: $(LIBXT) $(TESTS) $(PROGRAMS) $(if $(filter 1,$(CUDA)),cuda)

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

$(CUDA_TESTS) $(CUDA_PROGRAMS): $(BUILD)/%: $(BUILD)/%.cu.o $(LIBXT_CUDA) $(LIBXT)
	$(MPICC) $(XT_LDFLAGS) $(LDFLAGS) $< $(LIBXT_CUDA) $(LIBXT) -L$(CUDA_HOME)/lib64 -lcudart -lstdc++ $(LDLIBS) -o $@

-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(BUILD)/*/*/*.d $(BUILD)/*/*/*/*.d $(BUILD)/*/*/*/*/*/*.d)

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
	@echo "make bench: the bandwidth benchmarks of lecture 1 are not written yet;"; \
	 echo "they come with the lecture's remaining primitives (docs/lc1_basic.md)."; exit 2

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
	@echo "make deps                install what is missing (Open MPI, NumPy, a compiler)"
	@echo "make stubs               regenerate the student tree from solutions/"
	@echo "make format              clang-format every C file"
	@echo "make clean               remove build/"

.PHONY: all cuda grade test deps demo bench stubs format clean help
