/* cli/progcheck.c - finds the program `memline run` is asked to run and
 * checks LD_PRELOAD can work for it (dynamic ELF, not setuid, #! followed,
 * /bin/sh for a script without #!). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"

#define MAX_SCRIPT_DEPTH 4	/* the kernel allows a few nested interpreters */

static int check_candidate(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (access(path, X_OK) < 0)
		return -EACCES;
	return 0;
}

int ml_prog_resolve(const char *prog, char *out, size_t len)
{
	if (strchr(prog, '/')) {
		snprintf(out, len, "%s", prog);
		return check_candidate(out);
	}
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	int seen = -ENOENT;
	for (const char *p = path;; ) {
		const char *colon = strchr(p, ':');
		size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
		/* An empty PATH entry means the current directory. */
		snprintf(out, len, "%.*s%s%s", (int)dlen, dlen ? p : ".", "/", prog);
		int err = check_candidate(out);
		if (err == 0)
			return 0;
		if (err != -ENOENT && err != -ENOTDIR)
			seen = err;	/* remember "exists but cannot run" */
		if (!colon)
			break;
		p = colon + 1;
	}
	return seen;
}

/* Does the ELF image in fd have a PT_INTERP program header?  1, 0, or -1
 * when the headers cannot be read. */
static int elf_has_interp(int fd, const unsigned char *ident)
{
	if (ident[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr eh;
		if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
		    eh.e_phentsize != sizeof(Elf64_Phdr))
			return -1;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
				return -1;
			if (ph.p_type == PT_INTERP)
				return 1;
		}
		return 0;
	}
	if (ident[EI_CLASS] == ELFCLASS32) {
		Elf32_Ehdr eh;
		if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
		    eh.e_phentsize != sizeof(Elf32_Phdr))
			return -1;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf32_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph))
				return -1;
			if (ph.p_type == PT_INTERP)
				return 1;
		}
		return 0;
	}
	return -1;
}

/* The interpreter path of a "#!" line in head, copied to out.  0 or -1. */
static int script_interpreter(const char *head, size_t n, char *out, size_t len)
{
	size_t i = 2;
	while (i < n && (head[i] == ' ' || head[i] == '\t'))
		i++;
	size_t start = i;
	while (i < n && head[i] != ' ' && head[i] != '\t' && head[i] != '\n' && head[i] != '\0')
		i++;
	if (i == start || i - start >= len)
		return -1;
	memcpy(out, head + start, i - start);
	out[i - start] = '\0';
	return 0;
}

static int check_at_depth(const char *path, const char *shown, char *why, size_t len, int depth)
{
	char head[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "cannot read %s: %s", shown, strerror(errno));
		return -1;
	}
	ssize_t n = pread(fd, head, sizeof(head), 0);
	struct stat st;
	int stat_ok = fstat(fd, &st) == 0;
	int rc = 0;
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		char interp[256];
		if (depth >= MAX_SCRIPT_DEPTH || script_interpreter(head, (size_t)n, interp, sizeof(interp)) < 0) {
			snprintf(why, len, "%s has a #! line memline cannot follow", shown);
			rc = -1;
		} else {
			rc = check_at_depth(interp, interp, why, len, depth + 1);
		}
	} else if (n >= SELFMAG && memcmp(head, ELFMAG, SELFMAG) == 0) {
		int interp = elf_has_interp(fd, (const unsigned char *)head);
		if (interp < 0) {
			snprintf(why, len, "%s is not a valid ELF program", shown);
			rc = -1;
		} else if (interp == 0) {
			snprintf(why, len, "%s is statically linked; memline needs a dynamically "
				 "linked program (LD_PRELOAD cannot work)", shown);
			rc = -1;
		} else if (stat_ok && (st.st_mode & (S_ISUID | S_ISGID))) {
			snprintf(why, len, "%s is setuid or setgid; the loader ignores LD_PRELOAD "
				 "for setuid programs", shown);
			rc = -1;
		}
	} else if (depth == 0) {
		/* No #! and not ELF: exec refuses it (ENOEXEC), and execvp and
		 * shells then run it with /bin/sh, as `memline run` does. */
		rc = check_at_depth(ML_SCRIPT_SHELL, ML_SCRIPT_SHELL, why, len, depth + 1);
	} else {
		snprintf(why, len, "%s is neither an ELF program nor a #! script", shown);
		rc = -1;
	}
	close(fd);
	return rc;
}

int ml_prog_check_preloadable(const char *path, const char *shown, char *why, size_t len)
{
	return check_at_depth(path, shown, why, len, 0);
}
