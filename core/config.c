/* core/config.c - the runtime's configuration, read from the environment
 * once at start-up (never inside a hook). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/internal.h"

struct ml_config ml_config = {
	.output_dir = ".",
	.max_depth = ML_DEPTH_DEFAULT,
	.follow = true,
	.quiet = false,
	.fast_unwind = true,
	.file_mode = 0644,
};

/* "0", "no", "false", "off" are false; anything else non-empty is true. */
static bool env_bool(const char *name, bool dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	return !(strcmp(v, "0") == 0 || strcmp(v, "no") == 0 ||
		 strcmp(v, "false") == 0 || strcmp(v, "off") == 0);
}

/* A decimal number, or dflt when unset or not a number. */
static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	if (!v || !*v || *v == '-')
		return dflt;
	char *end;
	unsigned long long n = strtoull(v, &end, 10);
	return *end ? dflt : (uint64_t)n;
}

static uint32_t env_depth(void)
{
	const char *v = getenv("MEMLINE_DEPTH");
	if (!v || !*v)
		return ML_DEPTH_DEFAULT;
	char *end;
	unsigned long d = strtoul(v, &end, 10);
	if (*end || d == 0)
		return ML_DEPTH_DEFAULT;
	return d > ML_DEPTH_MAX ? ML_DEPTH_MAX : (uint32_t)d;
}

/* MEMLINE_FILE_MODE: the profiles' permission bits, in octal (`memline run`
 * passes 0666 less its own umask); 0644 without it.  Never the program's
 * umask, which it may change (to 0777, say) before a profile is written. */
static unsigned env_mode(void)
{
	const char *v = getenv("MEMLINE_FILE_MODE");
	if (!v || !*v)
		return 0644;
	char *end;
	unsigned long m = strtoul(v, &end, 8);
	return *end || m > 0777 ? 0644 : (unsigned)m;
}

void ml_config_load(void)
{
	ml_config.quiet = env_bool("MEMLINE_QUIET", false);
	ml_config.follow = env_bool("MEMLINE_FOLLOW", true);
	ml_config.max_depth = env_depth();
	ml_config.fast_unwind = !env_bool("MEMLINE_LIBUNWIND_ONLY", false);
	ml_config.verify_unwind = env_bool("MEMLINE_VERIFY_UNWIND", false);
	ml_config.sample_bytes = env_u64("MEMLINE_SAMPLE", 0);
	ml_config.sample_seed = env_u64("MEMLINE_SAMPLE_SEED", 0);
	ml_config.file_mode = env_mode();
	const char *dir = getenv("MEMLINE_OUTPUT_DIR");
	if (dir && *dir && strlen(dir) < sizeof(ml_config.output_dir)) {
		strcpy(ml_config.output_dir, dir);
	} else if (!getcwd(ml_config.output_dir, sizeof(ml_config.output_dir))) {
		strcpy(ml_config.output_dir, ".");
	}
}

/* True if the LD_PRELOAD entry [s, s+n) names libmemline. */
static bool is_memline(const char *s, size_t n)
{
	static const char name[] = "libmemline";
	for (size_t i = 0; i + sizeof(name) - 1 <= n; i++)
		if (memcmp(s + i, name, sizeof(name) - 1) == 0)
			return true;
	return false;
}

void ml_config_filter_preload(char *value)
{
	char *out = value, *p = value;
	while (*p) {
		size_t n = strcspn(p, ": ");
		if (n && !is_memline(p, n)) {
			if (out != value)
				*out++ = ':';
			memmove(out, p, n);
			out += n;
		}
		p += n;
		while (*p == ':' || *p == ' ')
			p++;
	}
	*out = '\0';
}

void ml_config_unpreload(void)
{
	extern char **environ;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
			ml_config_filter_preload(*e + 11);
}
