/* report/view_html.c - placeholder */
#include <errno.h>
#include "report/views.h"
static int b(const struct ml_view_opts *o, void **s) { (void)o; *s = 0; return -ENOSYS; }
static int a(void *s, const struct ml_agg *x, const struct ml_view_opts *o) { return -ENOSYS; }
static int e(void *s, FILE *out) { return -ENOSYS; }
const struct ml_docview ml_docview_html = { .name = "html", .begin = b, .add = a, .end = e };
