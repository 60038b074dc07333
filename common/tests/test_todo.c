/* test_todo.c: an unwritten function stops every rank with file, line and what to write. */
#include "xt_harness.h"

static void unwritten(int *x, int n)
{
    XT_TODO("write unwritten() here", x, n);
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    int x = 0;
    unwritten(&x, 1);
    xt_finalize();
    return 0;
}
