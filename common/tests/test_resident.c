/*
 * test_resident.c: a resident launch (resident.c), checked by the self-test.
 * Two "exercises" in one program, each its own main as objcopy would leave
 * it (xt_entry_<name>), run in turn from one --resident list:
 *   leak   each case xt_allocs 64 bytes and never frees them: its own second
 *          case still counts the first one's block (a leak is seen in its
 *          exercise)
 *   world  outputs its world rank and MPI_COMM_WORLD's size: run in a world
 *          smaller than the launch's, only that world's ranks hold groups,
 *          and nothing the leak left is counted in its records
 *   refuse a case with die=1 xt_allocs 64 bytes and stops with XT_CHECK, as an
 *          exercise refuses its input; the others output "after". Where the
 *          case line names this file (refuse=...) the refusal ends only that
 *          case and the block counts in no later one; naming another file, it
 *          ends the run
 *   todo   the same with an XT_TODO (stop=1), as an exercise not yet written:
 *          where the case line says todo=1 the TODO ends only that case
 */
#include "xt_harness.h"

#include <stdint.h>

static void leak_case(xt_case *c)
{
    (void)xt_alloc(XT_MEM_COMM, 64);
    int32_t rank = xt_rank();
    xt_case_output(c, "rank", &rank, XT_I32, 1);
}

static void world_case(xt_case *c)
{
    int32_t seen[2] = {xt_rank(), xt_size()};
    xt_case_output(c, "seen", seen, XT_I32, 2);
}

static void refuse_case(xt_case *c)
{
    if (xt_case_has(c, "die")) {
        (void)xt_alloc(XT_MEM_COMM, 64);
        XT_CHECK(0, "refused case %ld", xt_case_int(c, "die"));
    }
    int32_t after = 1;
    xt_case_output(c, "after", &after, XT_I32, 1);
}

static void todo_case(xt_case *c)
{
    if (xt_case_has(c, "stop")) {
        (void)xt_alloc(XT_MEM_COMM, 64);
        XT_TODO("not written");
    }
    int32_t after = 1;
    xt_case_output(c, "after", &after, XT_I32, 1);
}

static void demo(MPI_Comm comm)
{
    xt_printf_ordered(comm, "a resident launch's test exercise: run it with --resident LIST");
}

int xt_entry_leak(int argc, char **argv)
{
    return xt_main(argc, argv, leak_case, demo);
}

int xt_entry_world(int argc, char **argv)
{
    return xt_main(argc, argv, world_case, demo);
}

int xt_entry_refuse(int argc, char **argv)
{
    return xt_main(argc, argv, refuse_case, demo);
}

int xt_entry_todo(int argc, char **argv)
{
    return xt_main(argc, argv, todo_case, demo);
}

int main(int argc, char **argv)
{
    return xt_resident_main(argc, argv);
}
