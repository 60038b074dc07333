/*
 * mesh.c: the process mesh. One description ("pp=2,dp=2,tp=2") lays the ranks
 * of a communicator out on a grid, the last dimension varying fastest, and
 * every dimension's groups (the ranks that differ from this one only along
 * it) get their communicator, split from a duplicate of the parent. Each is
 * named after its dimension (and the duplicate "mesh"), so that the case
 * record says on which group each message went.
 */
#include "kit.h"
#include "xt_harness.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const default_names[3] = {"dp", "pp", "tp"};

/* One dimension's size at *p ("2" in "dp=2,..."): a positive integer, or dies. */
static int parse_size(const char *description, const char **p)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        xt_die("mesh \"%s\": expected a size at \"%s\"", description, s);
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        v = v * 10 + (*s - '0');
        if (v > 1 << 20)
            xt_die("mesh \"%s\": a size too large", description);
        s++;
    }
    if (v < 1)
        xt_die("mesh \"%s\": a dimension of size 0", description);
    *p = s;
    return (int)v;
}

/* "dp=2,pp=2,tp=2", or "2x2x2" with the names dp, pp, tp. */
static void parse(xt_mesh *m, const char *description)
{
    const char *s = description;
    m->ndims = 0;
    if (isdigit((unsigned char)*s)) {
        for (;;) {
            if (m->ndims == XT_MESH_MAX_DIMS)
                xt_die("mesh \"%s\": more than %d dimensions", description, XT_MESH_MAX_DIMS);
            m->sizes[m->ndims++] = parse_size(description, &s);
            if (*s == '\0')
                break;
            if (*s != 'x')
                xt_die("mesh \"%s\": expected 'x' between sizes at \"%s\"", description, s);
            s++;
        }
        if (m->ndims != 3)
            xt_die("mesh \"%s\": sizes without names are dp x pp x tp (three of them); "
                   "name the dimensions otherwise, as in \"dp=2,tp=4\"",
                   description);
        for (int d = 0; d < 3; d++)
            strcpy(m->names[d], default_names[d]);
        return;
    }
    for (;;) {
        if (m->ndims == XT_MESH_MAX_DIMS)
            xt_die("mesh \"%s\": more than %d dimensions", description, XT_MESH_MAX_DIMS);
        size_t n = 0;
        while (isalnum((unsigned char)s[n]) || s[n] == '_')
            n++;
        if (n == 0 || isdigit((unsigned char)s[0]))
            xt_die("mesh \"%s\": expected a dimension's name at \"%s\" (as in "
                   "\"dp=2,pp=2,tp=2\")",
                   description, s);
        if (n >= sizeof m->names[0])
            xt_die("mesh \"%s\": the name \"%.*s\" is longer than %zu characters", description,
                   (int)n, s, sizeof m->names[0] - 1);
        char *name = m->names[m->ndims];
        memcpy(name, s, n);
        name[n] = '\0';
        for (int d = 0; d < m->ndims; d++)
            if (strcmp(m->names[d], name) == 0)
                xt_die("mesh \"%s\": the dimension %s is named twice", description, name);
        if (strcmp(name, "mesh") == 0)
            xt_die("mesh \"%s\": \"mesh\" names the mesh's own communicator, not a dimension",
                   description);
        s += n;
        if (*s != '=')
            xt_die("mesh \"%s\": expected '=' after %s", description, name);
        s++;
        m->sizes[m->ndims++] = parse_size(description, &s);
        if (*s == '\0')
            return;
        if (*s != ',')
            xt_die("mesh \"%s\": expected ',' between dimensions at \"%s\"", description, s);
        s++;
    }
}

void xt_mesh_init(xt_mesh *m, const char *description, MPI_Comm comm)
{
    if (!description)
        xt_die("xt_mesh_init: no description");
    memset(m, 0, sizeof *m);
    parse(m, description);
    int np, rank;
    PMPI_Comm_size(comm, &np);
    long product = 1;
    char shape[96] = "";
    size_t len = 0;
    for (int d = 0; d < m->ndims; d++) {
        product *= m->sizes[d];
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%s=%d", d ? " x " : "",
                                m->names[d], m->sizes[d]);
    }
    if (product != np)
        xt_die("mesh \"%s\": %s is %ld ranks, but the communicator has %d", description, shape,
               product, np);
    XT_MPI_CHECK(PMPI_Comm_dup(comm, &m->comm));
    PMPI_Comm_rank(m->comm, &rank);
    /* The last dimension varies fastest: rank = ((c0 s1) + c1) s2 + c2. */
    for (int d = m->ndims - 1, r = rank; d >= 0; d--) {
        m->coords[d] = r % m->sizes[d];
        r /= m->sizes[d];
    }
    /* A group: the same coordinates elsewhere (the colour, this rank's with coordinate d set
     * to 0), ordered by coordinate d (the key). */
    for (int d = 0; d < m->ndims; d++) {
        int c[XT_MESH_MAX_DIMS];
        memcpy(c, m->coords, sizeof c);
        c[d] = 0;
        XT_MPI_CHECK(PMPI_Comm_split(m->comm, xt_mesh_rank_of(m, c), m->coords[d], &m->group[d]));
    }
    for (int d = m->ndims; d < XT_MESH_MAX_DIMS; d++)
        m->group[d] = MPI_COMM_NULL;
    /* Named after what they are, for MPI's tools and for the record: a message on the pp
     * group is logged on "other@pp", one on the mesh's own communicator on "other@mesh". */
    PMPI_Comm_set_name(m->comm, "mesh");
    xt_comm_name_group(m->comm, "mesh");
    for (int d = 0; d < m->ndims; d++) {
        PMPI_Comm_set_name(m->group[d], m->names[d]);
        xt_comm_name_group(m->group[d], m->names[d]);
    }
}

static int dim_of(const xt_mesh *m, const char *name, const char *who)
{
    for (int d = 0; d < m->ndims; d++)
        if (name && strcmp(m->names[d], name) == 0)
            return d;
    char known[64] = "";
    size_t len = 0;
    for (int d = 0; d < m->ndims; d++)
        len +=
            (size_t)snprintf(known + len, sizeof known - len, "%s%s", d ? ", " : "", m->names[d]);
    xt_die("%s: the mesh has no dimension \"%s\" (it has %s)", who, name ? name : "(null)", known);
}

MPI_Comm xt_mesh_group(const xt_mesh *m, const char *name)
{
    return m->group[dim_of(m, name, "xt_mesh_group")];
}

int xt_mesh_coord(const xt_mesh *m, const char *name)
{
    return m->coords[dim_of(m, name, "xt_mesh_coord")];
}

int xt_mesh_size(const xt_mesh *m, const char *name)
{
    return m->sizes[dim_of(m, name, "xt_mesh_size")];
}

int xt_mesh_rank_of(const xt_mesh *m, const int *coords)
{
    int rank = 0;
    for (int d = 0; d < m->ndims; d++) {
        if (coords[d] < 0 || coords[d] >= m->sizes[d])
            xt_die("xt_mesh_rank_of: coordinate %d along %s is outside 0..%d", coords[d],
                   m->names[d], m->sizes[d] - 1);
        rank = rank * m->sizes[d] + coords[d];
    }
    return rank;
}

void xt_mesh_free(xt_mesh *m)
{
    for (int d = 0; d < XT_MESH_MAX_DIMS; d++)
        if (m->group[d] != MPI_COMM_NULL) {
            xt_comm_name_group(m->group[d], NULL);
            PMPI_Comm_free(&m->group[d]);
        }
    if (m->comm != MPI_COMM_NULL) {
        xt_comm_name_group(m->comm, NULL);
        PMPI_Comm_free(&m->comm);
    }
    m->ndims = 0;
}

/* Appends to a growing text; a line about to pass 78 columns continues on the next,
 * indented by `indent`. */
typedef struct {
    char *buf;
    size_t len, cap, line_start;
} text;

static void put(text *t, int indent, const char *fmt, ...) XT_PRINTF(3, 4);
static void put(text *t, int indent, const char *fmt, ...)
{
    char piece[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(piece, sizeof piece, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (t->len + (size_t)n + (size_t)indent + 2 > t->cap) {
        t->cap = 2 * t->cap + (size_t)n + (size_t)indent + 2;
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf)
            xt_die("out of memory printing the mesh");
    }
    if (indent && t->len > t->line_start && t->len - t->line_start + (size_t)n > 78) {
        t->len += (size_t)snprintf(t->buf + t->len, t->cap - t->len, "\n%*s", indent, "");
        t->line_start = t->len - (size_t)indent;
    }
    memcpy(t->buf + t->len, piece, (size_t)n + 1);
    t->len += (size_t)n;
    char *nl = strrchr(piece, '\n');
    if (nl)
        t->line_start = t->len - (size_t)(n - (nl - piece) - 1);
}

void xt_mesh_print(const xt_mesh *m)
{
    if (xt_case_running()) /* a graded case prints nothing of it */
        return;
    int rank, np;
    PMPI_Comm_rank(m->comm, &rank);
    PMPI_Comm_size(m->comm, &np);
    if (rank != 0)
        return;
    text t = {0};
    put(&t, 0, "mesh");
    for (int d = 0; d < m->ndims; d++)
        put(&t, 0, "%s%s=%d", d ? " x " : " ", m->names[d], m->sizes[d]);
    put(&t, 0, " on %d ranks (%s varies fastest)\nrank ", np, m->names[m->ndims - 1]);
    for (int d = 0; d < m->ndims; d++)
        put(&t, 0, " %3s", m->names[d]);
    put(&t, 0, "\n");
    for (int r = 0; r < np; r++) {
        put(&t, 0, "%4d ", r);
        int c[XT_MESH_MAX_DIMS];
        for (int d = m->ndims - 1, q = r; d >= 0; d--) {
            c[d] = q % m->sizes[d];
            q /= m->sizes[d];
        }
        for (int d = 0; d < m->ndims; d++)
            put(&t, 0, " %3d", c[d]);
        put(&t, 0, "\n");
    }
    /* Each dimension's groups, each once: the ranks whose coordinate d is 0 start one. */
    for (int d = 0; d < m->ndims; d++) {
        int stride = 1;
        for (int e = d + 1; e < m->ndims; e++)
            stride *= m->sizes[e];
        put(&t, 0, "%s groups:", m->names[d]);
        for (int r = 0; r < np; r++) {
            if ((r / stride) % m->sizes[d] != 0)
                continue;
            char members[256];
            size_t len = 0;
            for (int k = 0; k < m->sizes[d] && len < sizeof members - 16; k++)
                len += (size_t)snprintf(members + len, sizeof members - len, "%s%d", k ? " " : "",
                                        r + k * stride);
            put(&t, (int)strlen(m->names[d]) + 8, " [%s]", members);
        }
        put(&t, 0, "\n");
    }
    xt_printf_root(m->comm, "%s", t.buf);
    free(t.buf);
}
