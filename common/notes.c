/*
 * notes.c: the remarks a case collects for the grader ("N <kind> <text>"
 * lines of its record): a guard byte overwritten, an input modified, a
 * request never completed, a buffer reused while MPI owned it, or what the
 * program itself noted with xt_case_note.
 */
#include "xt_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char kind[16];
    char *text;
} note;
static note *notes;
static int n_notes, cap_notes;

void xti_note(const char *kind, const char *fmt, ...)
{
    if (n_notes == cap_notes) {
        cap_notes = cap_notes ? 2 * cap_notes : 8;
        notes = realloc(notes, (size_t)cap_notes * sizeof *notes);
        XT_CHECK(notes, "out of memory");
    }
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    note *n = &notes[n_notes++];
    snprintf(n->kind, sizeof n->kind, "%s", kind);
    n->text = strdup(buf);
}

void xti_notes_clear(void)
{
    for (int i = 0; i < n_notes; i++)
        free(notes[i].text);
    n_notes = 0;
}

void xti_notes_write(FILE *f)
{
    for (int i = 0; i < n_notes; i++)
        fprintf(f, "N %s %s\n", notes[i].kind, notes[i].text);
}
