/* examples/leaky.c - memline's demo: a toy key=value log loader with a leak
 * (parse_record), a peak (build_index) and a hot allocating function
 * (tokenize).  `make demo` profiles it; see examples/demo.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct record {
	char *key;
	char *value;
	struct record *next;
};

static char *copy_string(const char *s)
{
	size_t n = strlen(s) + 1;
	char *c = malloc(n);
	memcpy(c, s, n);
	return c;
}

/* Hot: a short-lived copy of every word of a line. */
static NOINLINE size_t tokenize(const char *line)
{
	char buf[128];
	size_t total = 0;
	snprintf(buf, sizeof buf, "%s", line);
	for (char *save, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *word = malloc(32);
		snprintf(word, 32, "%s", tok);
		total += strlen(word);
		free(word);
	}
	return total;
}

/* The leak: when a key comes back, its record's old value (allocated at the
 * last copy_string below) is dropped without a free. */
static NOINLINE struct record *parse_record(int i, struct record *list)
{
	char key[16], value[48];
	snprintf(key, sizeof key, "key%d", i % 90);
	snprintf(value, sizeof value, "value number %d", i);
	for (struct record *r = list; r; r = r->next)
		if (strcmp(r->key, key) == 0) {
			r->value = copy_string(value);	/* old r->value lost */
			return list;
		}
	struct record *r = malloc(sizeof *r);
	r->key = copy_string(key);
	r->value = copy_string(value);
	r->next = list;
	return r;
}

/* The peak: a 1 MiB index built and thrown away. */
static NOINLINE size_t build_index(int pages)
{
	char **index = calloc((size_t)pages, sizeof *index);
	size_t sum = 0;
	for (int i = 0; i < pages; i++) {
		index[i] = malloc(4096);
		memset(index[i], i, 4096);
	}
	for (int i = 0; i < pages; i++) {
		sum += (unsigned char)index[i][i % 4096];
		free(index[i]);
	}
	free(index);
	return sum;
}

static void free_records(struct record *list)
{
	while (list) {
		struct record *next = list->next;
		free(list->key);
		free(list->value);
		free(list);
		list = next;
	}
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	struct record *list = NULL;
	size_t words = 0;
	for (int i = 0; i < n; i++) {
		words += tokenize("GET /index.html HTTP/1.1 200 a fairly ordinary log line");
		list = parse_record(i, list);
	}
	size_t sum = build_index(256);
	free_records(list);
	/* snprintf + write, not printf: stdout's buffer would be one more
	 * block never freed (glibc keeps it until exit). */
	char msg[128];
	int len = snprintf(msg, sizeof msg, "leaky: %d records, %zu letters, checksum %zu\n",
			   n, words, sum);
	if (write(1, msg, (size_t)len) != len)
		return 1;
	return 0;
}
