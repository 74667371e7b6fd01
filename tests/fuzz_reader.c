/* tests/fuzz_reader.c - libFuzzer target for the profile reader (ml_profile_parse).
 * The checksum would stop almost every mutation at the header, so unless an
 * input starts with 'M' (then it is parsed as it is) the target first repairs
 * the header (magic, version, sizes, checksum) and makes the sections raw
 * (flags 0, not compressed: a mutated zstd frame would stop at its own
 * checksum): the checks behind it get fuzzed (the varint columns of
 * ADDRESSES, FRAMES, STACKS and COUNTERS, the trie and the leaves that
 * point into it among them).  Inputs that start with 'M' are parsed as
 * they are (compressed ones included).
 * Build: see docs/format.md. */
#include "common/format.h"
#include "common/writer.h"
#include "report/profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Exercises what a report would read, so ASan sees every pointer used. */
static void walk(const struct ml_profile *p)
{
	volatile uint64_t sink = 0;

	sink += strlen(p->exe) + strlen(p->path);
	for (uint32_t i = 0; i < p->meta.argc; i++)
		sink += strlen(p->argv[i]);
	for (size_t i = 0; i < p->n_modules; i++) {
		sink += strlen(p->modules[i].path);
		for (uint32_t b = 0; b < p->modules[i].build_id_len; b++)
			sink += p->modules[i].build_id[b];
	}
	/* Frames rebuilt from the FRAMES trie: depth of them, readable. */
	for (size_t i = 0; i < p->n_stacks; i++) {
		uint64_t *buf = malloc(((size_t)p->stacks[i].depth + 1) * sizeof(*buf));
		const uint64_t *frames;

		if (!buf)
			abort();
		frames = ml_profile_stack_frames(p, &p->stacks[i], buf);
		for (uint32_t f = 0; f < p->stacks[i].depth; f++)
			sink += (uintptr_t)ml_profile_module(p, frames[f]);
		free(buf);
	}
	for (size_t i = 0; i < p->n_samples; i++)
		for (uint32_t f = 0; f < p->samples[i].depth; f++)
			sink += p->samples[i].frames[f];
	for (size_t i = 0; i < p->n_counters; i++)
		sink += ml_profile_stack(p, p->counters[i].stack_id)->depth;
	for (size_t i = 0; i < p->n_timeline; i++)
		sink += p->timeline[i].live_bytes;
	for (size_t i = 0; i < p->n_notes; i++)
		sink += strlen(p->notes[i]);
	(void)sink;
}

/* The loader checks the header before it reads the rest of a file: whatever
 * the bytes, it must reach the verdict the buffer parser reached (want). */
static void same_verdict_from_file(const uint8_t *data, size_t len, const char *want)
{
	struct ml_profile *p = NULL;
	char path[64], err[256] = "";
	int fd = memfd_create("fuzz", 0);
	int rc;

	if (fd < 0)
		return;
	if (write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = ml_profile_load(path, &p, err, sizeof(err));
	if (rc == 0)
		ml_profile_free(p);
	close(fd);
	if (rc == -ENOMEM)
		return;
	if ((rc == 0) != (want[0] == '\0') || strcmp(err, want) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct ml_profile *p = NULL;
	char err[256] = "";
	uint8_t *copy;

	if (len >= sizeof(struct ml_fmt_header) && data[0] != 'M') {
		struct ml_fmt_header h;

		copy = malloc(len);
		if (!copy)
			return 0;
		memcpy(copy, data, len);
		memcpy(&h, copy, sizeof(h));
		memcpy(h.magic, ML_FMT_MAGIC, sizeof(h.magic));
		h.version = ML_FMT_VERSION;
		h.header_size = sizeof(h);
		h.file_size = len;
		h.flags = 0;
		h.payload_size = len - sizeof(h);
		memset(h.reserved, 0, sizeof(h.reserved));
		h.checksum = ml_fnv1a(ML_FNV_INIT, copy + sizeof(h), len - sizeof(h));
		memcpy(copy, &h, sizeof(h));
		if (ml_profile_parse(copy, len, &p, err, sizeof(err)) == 0) {
			walk(p);
			ml_profile_free(p);
		}
		same_verdict_from_file(copy, len, err);
		free(copy);
		return 0;
	}
	if (ml_profile_parse(data, len, &p, err, sizeof(err)) == 0) {
		walk(p);
		ml_profile_free(p);
	}
	same_verdict_from_file(data, len, err);
	return 0;
}
