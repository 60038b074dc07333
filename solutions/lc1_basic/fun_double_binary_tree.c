/*
 * fun_double_binary_tree.c: NCCL's double binary tree all-reduce.
 * docs/lc1_basic.md#fun_double_binary_tree
 *
 * A binary tree all-reduce takes 2 log2 np steps where a ring takes 2 (np-1),
 * but in one tree the interior ranks carry everything (a rank with two
 * children receives 2 S and sends 3 S) while half the ranks, the leaves, send
 * S once. Two trees fix that: in tree 0 the leaves are the odd positions, and
 * tree 1 puts the other ranks there, so each rank is interior in at most one
 * of them. Half of the buffer goes up and down each tree, at the same time.
 *
 * A tree over np positions, in order (the position's lowest set bit 2^j is its
 * level j; positions of level j-1 hang under it at -2^(j-1) and at +2^(j-1),
 * the right one closer where the tree ends early); position 0 is the root,
 * with one child, the largest power of two below np:
 *
 *     np = 8   tree 0 (ranks = positions)       tree 1 (mirrored: rank = 7 - position)
 *              0                                 7
 *              |                                 |
 *              4                                 3
 *            /   \                             /   \
 *           2     6                           5     1
 *          / \   / \                         / \   / \
 *         1   3 5   7                       6   4 2   0
 *
 * Tree 1 is tree 0 mirrored (rank = np-1 - position) when np is even, so its
 * leaves are the even ranks; shifted by one (rank = position + 1 mod np) when
 * np is odd. Each half is cut into chunks of at most `chunk` elements that
 * flow up the tree and back down like a pipeline: a rank of level h handles
 * chunk c at step c + h going up, so a parent always finds its children's
 * chunk sent one step earlier.
 *
 * Cost for S bytes, C chunks a half, H = ceil(log2 np): a rank sends its half
 * up once and down to each child, at most 2 S in all (S/2 as a leaf of one
 * tree, 3 S/2 as an interior rank of the other), np-1 messages of each half
 * up and np-1 down per chunk; about 2 (C + H) steps of at most two messages
 * each, against the ring's 2 (np-1) steps of S/np. NCCL uses the trees across
 * nodes, where log2 of the node count beats the ring's latency.
 */
#include "xt.h"

#include <stdlib.h>

// BEGIN SOLUTION
/* The rank's position in tree t. */
static int position_of(int np, int rank, int tree)
{
    if (tree == 0)
        return rank;
    return np % 2 == 0 ? np - 1 - rank : (rank + np - 1) % np;
}

/* The rank at a position of tree t. */
static int rank_at(int np, int pos, int tree)
{
    if (pos < 0 || tree == 0)
        return pos;
    return np % 2 == 0 ? np - 1 - pos : (pos + 1) % np;
}

/* Chunk c of the half of len elements from element lo: its first byte; its length in *n. */
static char *chunk_at(char *bytes, int size, int lo, int len, int chunk, int c, int *n)
{
    *n = len - c * chunk < chunk ? len - c * chunk : chunk;
    return bytes + ((size_t)lo + (size_t)c * (size_t)chunk) * (size_t)size;
}
// END SOLUTION

int double_tree_links(int np, int rank, int tree, int *parent, int children[2])
{
    /*
     * TODO: rank's links in tree `tree` (0 or 1) of np ranks.
     *   Its parent and children: positions in order as the header draws them; tree 1
     *   mirrored for np even, shifted by one for np odd; -1 for no parent (the root) and
     *   no child (children in any order). Returns the level: 0 for a leaf, the root's
     *   ceil(log2 np) (0 when np = 1).
     */
    // BEGIN SOLUTION
    int pos = position_of(np, rank, tree);
    int top = 1; /* the smallest power of two >= np */
    while (top < np)
        top <<= 1;
    int bit = pos == 0 ? top : (pos & -pos), level = 0;
    while ((1 << level) < bit)
        level++;
    int up = -1, down[2] = {-1, -1};
    if (pos == 0) {
        if (np > 1)
            down[0] = top >> 1;
    } else {
        up = (pos ^ bit) | (bit << 1);
        if (up >= np)
            up = pos ^ bit;
        int low = bit >> 1;
        if (low > 0) {
            down[0] = pos - low;
            while (low > 0 && pos + low >= np) /* the tree ends early: a closer right child */
                low >>= 1;
            if (low > 0)
                down[1] = pos + low;
        }
    }
    *parent = rank_at(np, up, tree);
    children[0] = rank_at(np, down[0], tree);
    children[1] = rank_at(np, down[1], tree);
    return level;
    // END SOLUTION
}

void double_tree_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, int chunk,
                           MPI_Comm comm)
{
    /*
     * TODO: all-reduce buf in place over two binary trees.
     *   Half t of buf (elements [count t/2, count (t+1)/2)) is reduced up tree t and
     *   broadcast back down it, both trees at once, pipelined in messages of at most
     *   chunk elements. Point-to-point only. Within 4 (C + ceil(log2 np)) rounds, C =
     *   chunks a half.
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    if (np == 1 || count == 0)
        return;
    int lo[2] = {0, count / 2}, len[2] = {count / 2, count - count / 2};
    int parent[2], kids[2][2], level[2], chunks[2];
    for (int t = 0; t < 2; t++) {
        level[t] = double_tree_links(np, rank, t, &parent[t], kids[t]);
        chunks[t] = (len[t] + chunk - 1) / chunk;
    }
    int height = 0;
    while ((1 << height) < np)
        height++;
    int steps = (chunks[0] > chunks[1] ? chunks[0] : chunks[1]) + height;
    /* A message to each tree neighbour per chunk, each in flight until the phase's end. */
    MPI_Request *sent = xt_malloc(sizeof(MPI_Request) * (size_t)(3 * (chunks[0] + chunks[1]) + 1));
    void *scratch = xt_malloc((size_t)chunk * (size_t)size);
    int nsent = 0;

    /* Up: at step s a rank of level h folds its children's chunk s - h in and sends it on. */
    for (int s = 0; s < steps; s++)
        for (int t = 0; t < 2; t++) {
            int c = s - level[t];
            if (c < 0 || c >= chunks[t])
                continue;
            int n;
            char *at = chunk_at(buf, size, lo[t], len[t], chunk, c, &n);
            for (int k = 0; k < 2; k++)
                if (kids[t][k] >= 0) {
                    MPI_Recv(scratch, n, dt, kids[t][k], t, comm, MPI_STATUS_IGNORE);
                    MPI_Reduce_local(scratch, at, n, dt, op);
                }
            if (parent[t] >= 0)
                MPI_Isend(at, n, dt, parent[t], t, comm, &sent[nsent++]);
        }
    /* The chunks sent up are overwritten on the way down. */
    MPI_Waitall(nsent, sent, MPI_STATUSES_IGNORE);
    nsent = 0;

    /* Down: the mirror, the root first: a rank of level h passes chunk s - (height - h) on. */
    for (int s = 0; s < steps; s++)
        for (int t = 0; t < 2; t++) {
            int c = s - (height - level[t]);
            if (c < 0 || c >= chunks[t])
                continue;
            int n;
            char *at = chunk_at(buf, size, lo[t], len[t], chunk, c, &n);
            if (parent[t] >= 0)
                MPI_Recv(at, n, dt, parent[t], 2 + t, comm, MPI_STATUS_IGNORE);
            for (int k = 0; k < 2; k++)
                if (kids[t][k] >= 0)
                    MPI_Isend(at, n, dt, kids[t][k], 2 + t, comm, &sent[nsent++]);
        }
    MPI_Waitall(nsent, sent, MPI_STATUSES_IGNORE);
    free(scratch);
    free(sent);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_double_binary_tree.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
