# What make bench links with this lecture's driver, bench.c: the collectives'
# files (BENCH_SOURCES), the functions the driver calls (BENCH_FUNCTIONS, kept
# global; everything else in each file stays private), and each file again as a
# .direct.o copy whose MPI_x calls are PMPI_x, past libxt's counters
# (BENCH_DIRECT). The Makefile includes this file; bench.py reads it too.
BENCH_SOURCES   := fun_ring_allreduce fun_allreduce_rd fun_hierarchical_allreduce \
                   fun_double_binary_tree fun_gather fun_reduce_scatter fun_broadcast \
                   fun_all2all_scratch
BENCH_FUNCTIONS := ring_allreduce allreduce_rd hierarchical_allreduce double_tree_allreduce \
                   allgather_ring reduce_scatter_ring bcast_binomial alltoallv_scratch
BENCH_DIRECT    := 1
