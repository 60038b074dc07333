# What make bench links with this lecture's driver, bench.c: the MLP block with
# and without sequence parallelism (model_tp.c runs as its own program, see
# bench.py). The Makefile includes this file.
BENCH_SOURCES   := mlp_tp sequence_parallel
BENCH_FUNCTIONS := mlp_tp_forward mlp_tp_backward seqpar_forward seqpar_backward
