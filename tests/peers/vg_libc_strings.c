/* vg_libc_strings.c - peer: valgrind memcheck's tests of allocating libc
 * calls (strdup, asprintf, getline, open_memstream, scandir, fopen). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *a = strdup("hello, world");
	char *b = strndup("abcdefghij", 4);
	char *c = NULL;
	if (asprintf(&c, "%d-%s", 42, a) < 0)
		return 1;
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	for (int i = 0; i < 100; i++)
		fprintf(m, "line %d\n", i);
	fclose(m);
	FILE *in = fmemopen(buf, len, "r");
	char *line = NULL;
	size_t cap = 0;
	int lines = 0;
	while (getline(&line, &cap, in) > 0)
		lines++;
	fclose(in);
	struct dirent **names;
	int n = scandir("/usr/share/doc/bash", &names, NULL, alphasort);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	printf("%s %s %s %d %d\n", a, b, c, lines, n > 0);
	free(a);
	free(c);
	free(buf);
	free(line);
	(void)b;	/* leaked */
	return 0;
}
