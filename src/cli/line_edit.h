/* line_edit.h — a small line editor for `mtplx chat` (no readline dependency): on a terminal it
 * reads keys in raw mode with cursor movement, history (Up/Down, kept in a file across runs),
 * kill keys and bracketed paste (a pasted newline continues the input instead of sending it); on
 * anything else it reads plain lines. One line is edited at a time; the caller joins continued
 * lines into one message. */
#ifndef MTPLX_CLI_LINE_EDIT_H
#define MTPLX_CLI_LINE_EDIT_H

#include <stddef.h>

typedef enum {
    LE_LINE = 0,      /* a line was accepted with Enter */
    LE_CONTINUE,      /* a line ended by a newline inside a paste: more of the same input follows */
    LE_INTERRUPT,     /* Ctrl-C: the line was discarded */
    LE_EOF,           /* Ctrl-D on an empty line, or end of input */
    LE_ERROR          /* read error or out of memory */
} le_status;

typedef struct {
    char  **hist;       /* history entries, oldest first (heap strings, may hold '\n') */
    int     n_hist, cap_hist;
    int     max_hist;   /* entries kept (file and memory) */
    char   *hist_path;  /* history file, or NULL: none */
    int     tty;        /* stdin and stdout are terminals: edit in raw mode */
    int     in_paste;   /* inside a bracketed paste (ESC[200~ ... ESC[201~) across calls */
} line_editor;

/* Set up an editor; hist_path (may be NULL) is loaded now and appended to by le_history_add.
 * Returns 0 or -1 (out of memory). A missing or unreadable history file is not an error. */
int le_init(line_editor *le, const char *hist_path);
void le_free(line_editor *le);

/* Read one line after printing prompt (on a terminal). *line is a heap string without the newline
 * (caller frees) for LE_LINE and LE_CONTINUE, else NULL. */
le_status le_read(line_editor *le, const char *prompt, char **line);

/* Remember entry (skipped when empty or equal to the last one) and append it to the history file.
 * Newlines and backslashes are escaped in the file (\n, \\). */
void le_history_add(line_editor *le, const char *entry);

#endif
