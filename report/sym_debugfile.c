/* report/sym_debugfile.c - finds a module's separate debug file, as elfutils'
 * standard lookup does (by build-id under the debug directories, then by
 * .gnu_debuglink next to the module, in its .debug/ and under the debug
 * directories), but opens only regular files: a FIFO or a device at one of
 * those paths is skipped instead of blocking the report. */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "report/regfile.h"
#include "report/sym_internal.h"

#define DEFAULT_DEBUG_DIR "/usr/lib/debug"

/* The absolute debug directories, $MEMLINE_DEBUG_DIR first; n of them. */
static size_t debug_dirs(const char *dirs[2])
{
	const char *env = getenv("MEMLINE_DEBUG_DIR");
	size_t n = 0;

	if (env && env[0] == '/')
		dirs[n++] = env;
	dirs[n++] = DEFAULT_DEBUG_DIR;
	return n;
}

void ml_symi_build_id_path(char *out, size_t len, const char *dir, const uint8_t *id, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	char hexid[2 * 64 + 1];

	out[0] = '\0';
	if (n < 2 || n > 64)
		return;
	for (size_t i = 0; i < n; i++) {
		hexid[2 * i] = digits[id[i] >> 4];
		hexid[2 * i + 1] = digits[id[i] & 15];
	}
	hexid[2 * n] = '\0';
	snprintf(out, len, "%s/.build-id/%.2s/%s.debug", dir, hexid, hexid + 2);
}

/* CRC-32 (IEEE, reflected), as .gnu_debuglink records it. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
	static uint32_t table[256];

	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	crc = ~crc;
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static bool crc_matches(int fd, uint32_t want)
{
	unsigned char buf[65536];
	uint32_t crc = 0;
	off_t at = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
		crc = crc32_update(crc, buf, (size_t)n);
		at += n;
	}
	return n == 0 && crc == want;
}

static bool build_id_matches(int fd, const void *want, int want_len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	const void *id;
	ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	bool same = n == want_len && memcmp(id, want, (size_t)n) == 0;

	if (elf)
		elf_end(elf);
	return same;
}

/* Opens candidate if it is a regular file that is the module's debug file:
 * the same build-id when the module has one, else the debuglink CRC.
 * Returns the descriptor with *name set (malloc'd), or -1. */
static int try_candidate(const char *candidate, const void *id, int id_len, bool check_crc,
			 uint32_t crc, const char *main_file, char **name)
{
	struct stat st, main_st;
	int fd = ml_regfile_open(candidate, &st, NULL);

	if (fd < 0)
		return -1;
	/* A debuglink naming the module's own file (some packages do). */
	if (main_file && stat(main_file, &main_st) == 0 && main_st.st_dev == st.st_dev &&
	    main_st.st_ino == st.st_ino)
		goto reject;
	if (id_len > 0 ? !build_id_matches(fd, id, id_len) : check_crc && !crc_matches(fd, crc))
		goto reject;
	*name = strdup(candidate);
	if (*name)
		return fd;
reject:
	close(fd);
	return -1;
}

/* The debuglink candidates: DIR/LINK, DIR/.debug/LINK, DEBUGDIR/DIR/LINK. */
static int by_debuglink(const char *file_name, const char *link, uint32_t crc, const void *id,
			int id_len, char **name)
{
	const char *dirs[2];
	size_t n_dirs = debug_dirs(dirs);
	const char *slash = file_name ? strrchr(file_name, '/') : NULL;
	int dir_len = slash ? (int)(slash - file_name) : 0;
	char path[4096];
	int fd;

	if (!link || !*link || !slash)
		return -1;
	if (link[0] == '/')
		return try_candidate(link, id, id_len, true, crc, file_name, name);
	snprintf(path, sizeof(path), "%.*s/%s", dir_len, file_name, link);
	if ((fd = try_candidate(path, id, id_len, true, crc, file_name, name)) >= 0)
		return fd;
	snprintf(path, sizeof(path), "%.*s/.debug/%s", dir_len, file_name, link);
	if ((fd = try_candidate(path, id, id_len, true, crc, file_name, name)) >= 0)
		return fd;
	for (size_t i = 0; i < n_dirs && file_name[0] == '/'; i++) {
		snprintf(path, sizeof(path), "%s%.*s/%s", dirs[i], dir_len, file_name, link);
		if ((fd = try_candidate(path, id, id_len, true, crc, file_name, name)) >= 0)
			return fd;
	}
	return -1;
}

int ml_symi_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			   Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			   GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id = NULL;
	GElf_Addr vaddr;
	int id_len = dwfl_module_build_id(mod, &id, &vaddr);
	const char *dirs[2];
	size_t n_dirs = debug_dirs(dirs);
	char path[4096];
	int fd;

	(void)userdata;
	(void)modname;
	(void)base;
	for (size_t i = 0; i < n_dirs && id_len > 0; i++) {
		ml_symi_build_id_path(path, sizeof(path), dirs[i], id, (size_t)id_len);
		if (path[0] && (fd = try_candidate(path, id, id_len, false, 0, file_name,
						   debuginfo_file_name)) >= 0)
			return fd;
	}
	fd = by_debuglink(file_name, debuglink_file, debuglink_crc, id, id_len, debuginfo_file_name);
	return fd >= 0 ? fd : -ENOENT;
}
