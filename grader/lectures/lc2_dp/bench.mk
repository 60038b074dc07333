# What make bench links with this lecture's driver, bench.c: the two DDP steps,
# with their MPI_Testall and MPI_Waitall renamed to the driver's
# xt_bench_Testall and xt_bench_Waitall, which pass through to MPI, or skip the
# progress calls, or trace each bucket. The Makefile includes this file.
BENCH_SOURCES   := ddp_naive ddp_bucketed
BENCH_FUNCTIONS := ddp_naive_step plan_buckets ddp_bucketed_step
BENCH_RENAMES   := MPI_Testall=xt_bench_Testall MPI_Waitall=xt_bench_Waitall
