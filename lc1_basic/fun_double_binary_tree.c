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

int double_tree_links(int np, int rank, int tree, int *parent, int children[2])
{
    /*
     * TODO: rank's links in tree `tree` (0 or 1) of np ranks.
     *   Its parent and children: positions in order as the header draws them; tree 1
     *   mirrored for np even, shifted by one for np odd; -1 for no parent (the root) and
     *   no child (children in any order). Returns the level: 0 for a leaf, the root's
     *   ceil(log2 np) (0 when np = 1).
     */
    XT_TODO("rank's links in tree `tree` (0 or 1) of np ranks.", np, rank, tree, parent, children);
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
    XT_TODO("all-reduce buf in place over two binary trees.", buf, count, dt, op, chunk, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_double_binary_tree.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
