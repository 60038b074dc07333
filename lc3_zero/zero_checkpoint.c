/*
 * zero_checkpoint.c: save ZeRO-1 state at one world size, load it at another.
 * docs/lc3_zero.md#zero_checkpoint
 *
 * A ZeRO-1 rank owns one shard of the optimizer: Adam's m and v for the
 * parameters [lo, lo + count). A checkpoint keeps it that way: every rank
 * writes its own shard to its own file, in parallel, and no rank ever holds
 * the whole optimizer state. The job may come back on a different number of
 * ranks (a node lost, more nodes granted); then the shards are cut anew, and
 * each new rank reads, from every old file that overlaps its new shard, just
 * the overlapping slice:
 *
 *     nparams = 10, saved at np = 4 (shard 3), loaded at np = 3 (shard 4)
 *
 *     flat index   0  1  2  3  4  5  6  7  8  9  .  .
 *     old rank     0  0  0  1  1  1  2  2  2  3           files shard-0 .. shard-3
 *     new rank     0  0  0  0  1  1  1  1  2  2  2  2     (. = padding)
 *
 *     new r0 reads [0,3) from shard-0 and [3,4) from shard-1
 *     new r1 reads [4,6) from shard-1 and [6,8) from shard-2
 *     new r2 reads [8,9) from shard-2 and [9,10) from shard-3
 *
 * The files (every number little-endian, as the machine writes it):
 *
 *     DIR/shard-<r>.bin   rank r of the saving world: a header of 8 int64,
 *                           magic, nparams, np, r, lo, count, step, 0
 *                         then 3 blocks of count float32: the parameters
 *                         [lo, lo + count), their m, their v. Parameter i's
 *                         m is at byte 64 + 4 (count + i - lo).
 *     DIR/meta.bin        the same header with r = -1, lo = 0, count =
 *                         nparams; written by rank 0 once every shard is on
 *                         disk: a checkpoint without it is incomplete.
 *
 * Files are written and read with MPI-IO on MPI_COMM_SELF: one rank, one
 * file, reads and writes at explicit offsets (pread and pwrite, in effect).
 *
 * Cost: saving writes 64 + 12 count bytes per rank, 12 nparams in all (plus
 * headers), at any np, all ranks at once. Loading reads 8 count bytes of
 * moments and 4 count of parameters per rank, from at most
 * ceil(shard_new / shard_old) + 1 files. The rest of the parameters comes
 * from one all-gather (4 np shard bytes received per rank), the one every
 * step ends with: reading the whole model on every rank would work too, but
 * np ranks would then read np times the model from a file system that is
 * slower than the network. The moments never cross the network.
 */
#include "kit.h" /* zero_state, zero1_train_step: the ZeRO-1 step this trains with */
#include "xt_nn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAGIC 0x3154504b43545858LL /* "XXTCKPT1" read as little-endian bytes */

/* The first 64 bytes of every file of a checkpoint. */
typedef struct {
    int64_t magic, nparams, np, rank, lo, count, step, zero;
} ckpt_header;

enum { HEADER_BYTES = sizeof(ckpt_header) };

/* ------------------------------------------------------------ file helpers */

/*
 * Given: opening, reading and writing that die naming the file and MPI's
 * reason. (Not static: until the TODOs are written nothing calls them, and
 * an unused static function is a warning.)
 */

/* DIR/shard-<rank>.bin, or DIR/meta.bin for rank -1. */
void ckpt_path(char *out, size_t cap, const char *dir, int rank)
{
    if (rank < 0)
        snprintf(out, cap, "%s/meta.bin", dir);
    else
        snprintf(out, cap, "%s/shard-%d.bin", dir, rank);
}

void check_io(int rc, const char *what, const char *path)
{
    if (rc == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    xt_die("%s %s: %s", what, path, text);
}

/* Opens `path` for this rank alone: MPI_MODE_RDONLY, or MPI_MODE_WRONLY | MPI_MODE_CREATE. */
MPI_File ckpt_open(const char *path, int amode)
{
    MPI_File f;
    check_io(MPI_File_open(MPI_COMM_SELF, path, amode, MPI_INFO_NULL, &f), "cannot open", path);
    return f;
}

void ckpt_close(MPI_File *f, const char *path)
{
    check_io(MPI_File_close(f), "cannot close", path);
}

/* Writes n elements of dt at byte `at`. */
void ckpt_write(MPI_File f, const char *path, MPI_Offset at, const void *buf, long n,
                MPI_Datatype dt)
{
    check_io(MPI_File_write_at(f, at, buf, (int)n, dt, MPI_STATUS_IGNORE), "cannot write", path);
}

/* Reads n elements of dt from byte `at`; dies if the file ends before. */
void ckpt_read(MPI_File f, const char *path, MPI_Offset at, void *buf, long n, MPI_Datatype dt)
{
    MPI_Status st;
    int got = 0;
    check_io(MPI_File_read_at(f, at, buf, (int)n, dt, &st), "cannot read", path);
    MPI_Get_count(&st, dt, &got);
    XT_CHECK(got == n, "%s: expected %ld values at byte %lld, the file ends after %d", path, n,
             (long long)at, got);
}

/* Reads a header and checks that it is one of this checkpoint's. */
ckpt_header ckpt_read_header(MPI_File f, const char *path)
{
    ckpt_header h;
    ckpt_read(f, path, 0, &h, 8, MPI_INT64_T);
    XT_CHECK(h.magic == CKPT_MAGIC, "%s is not a checkpoint file (magic %016llx)", path,
             (unsigned long long)h.magic);
    return h;
}

/* ------------------------------------------------------------ the exercise */

/*
 * Collective over comm, the world of ZeRO state z: every rank writes its own
 * shard of the parameters and of Adam's moments to DIR/shard-<rank>.bin (the
 * format above); then rank 0 writes DIR/meta.bin. DIR exists.
 */
void zero_checkpoint_save(const zero_state *z, const xt_mlp *m, const char *dir, MPI_Comm comm)
{
    /*
     * TODO: write this rank's shard, then mark the checkpoint complete.
     *   The files are those of the header comment: DIR/shard-<rank>.bin from every rank (one
     *   that holds no parameters too), DIR/meta.bin from rank 0 once every shard is on disk.
     *   The grader reads them itself, byte for byte against that layout (every header field,
     *   the size, the parameters, m and v this rank held), then through your loader at another
     *   world size. Files only through MPI-IO (the ckpt_* helpers): fopen and open are refused.
     *   Over the case a rank may receive through MPI only the weights' broadcast, the load's
     *   all-gather and 64 B: each rank writes its own shard, no moments travel to rank 0.
     */
    XT_TODO("write this rank's shard, then mark the checkpoint complete.", z, m, dir, comm);
}

/*
 * Collective over comm, a world of any size: z was just set up for it
 * (zero_state_init: this rank's new lo, count and shard, moments zero)
 * and m->params is padded to np * z->shard floats. Fills z->m, z->v and
 * z->step from the checkpoint in DIR, and all of m->params.
 */
void zero_checkpoint_load(zero_state *z, xt_mlp *m, const char *dir, MPI_Comm comm)
{
    /*
     * TODO: read meta.bin, then the old shards overlapping the new one.
     *   Checked bit for bit right after loading: z->step = the saved Adam step; z->m, z->v = the
     *   moments the old ranks held for this rank's new [z->lo, z->lo + z->count), the old shards
     *   being ceil(nparams / old_np) wide; m->params on every rank = the saved parameters, all
     *   nparams of them. Training then goes on, and must equal uninterrupted AdamW within
     *   5e-5 + 2e-5 |w|. MPI budget per rank over the whole case: one all-gather of the
     *   parameters (4 np shard B received) and 64 B of metadata beyond the initial broadcast;
     *   the moments come from the files only. Files only through MPI-IO (fopen, open refused).
     *   A damaged checkpoint (a file cut short, a shard of another save, a bad magic) must stop
     *   the run: xt_die or XT_CHECK with a message that names the file.
     */
    XT_TODO("read meta.bin, then the old shards overlapping the new one.", z, m, dir, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/zero_checkpoint.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
