# What make bench links with this lecture's driver, bench.c: data-parallel
# Adam and ZeRO stages 1, 2, 3; each stage's state struct stays private to its
# file. The Makefile includes this file.
BENCH_SOURCES   := distributed_adam adam_zero1 adam_zero2 adam_zero3
BENCH_FUNCTIONS := dp_adam_init dp_adam_step dp_adam_free \
                   zero1_init zero1_step zero1_free \
                   zero2_init zero2_step zero2_free \
                   zero3_init zero3_gather_layer zero3_step zero3_free
