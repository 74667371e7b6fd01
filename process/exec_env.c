/* process/exec_env.c - the environment a program started by exec or
 * posix_spawn gets: LD_PRELOAD with or without libmemline (following
 * children or not), and the MEMLINE_* settings.  No malloc. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "core/core.h"
#include "process/internal.h"

static const char *self_path;	/* libmemline's path, for exec'd programs' LD_PRELOAD */

/* The MEMLINE_* settings this process started with, for exec'd programs
 * whose environment lost them (env -i): profiles still go where asked. */
static char saved_env_buf[8192];
static char *saved_env[ML_PROC_SAVED_ENV_MAX];
static uint32_t n_saved_env;

static void save_settings(void)
{
	extern char **environ;
	size_t used = 0;
	for (char **e = environ; e && *e && n_saved_env < ML_PROC_SAVED_ENV_MAX; e++) {
		if (strncmp(*e, "MEMLINE_", 8) != 0 || !strchr(*e, '='))
			continue;
		size_t len = strlen(*e) + 1;
		if (used + len > sizeof(saved_env_buf))
			break;
		memcpy(saved_env_buf + used, *e, len);
		saved_env[n_saved_env++] = saved_env_buf + used;
		used += len;
	}
}

void ml_proc_env_start(void)
{
	save_settings();
	Dl_info self;
	if (dladdr((void *)&ml_proc_env_start, &self) && self.dli_fname && self.dli_fname[0] == '/')
		self_path = self.dli_fname;
}

/* The LD_PRELOAD entry an exec'd program gets, into buf (see
 * ml_proc_exec_env).  value is the current entry's value (NULL if none).
 * False: keep as is. */
static bool preload_entry(const char *value, char *buf, size_t cap)
{
	if (!value) {	/* none at all (env -i): ours alone when following */
		if (!ml_config.follow || !self_path || 11 + strlen(self_path) + 1 > cap)
			return false;
		memcpy(buf, "LD_PRELOAD=", 11);
		strcpy(buf + 11, self_path);
		return true;
	}
	if (strlen(value) + 12 > cap)
		return false;
	memcpy(buf, "LD_PRELOAD=", 11);
	strcpy(buf + 11, value);
	ml_config_filter_preload(buf + 11);
	if (!ml_config.follow)
		return true;
	if (strcmp(buf + 11, value) != 0 || !self_path)
		return false;	/* libmemline is there already: leave it as it was */
	size_t self_len = strlen(self_path), rest = strlen(value);
	if (11 + self_len + 1 + rest + 1 > cap)
		return false;
	memmove(buf + 11 + self_len + (rest ? 1 : 0), buf + 11, rest + 1);
	memcpy(buf + 11, self_path, self_len);
	if (rest)
		buf[11 + self_len] = ':';
	return true;
}

/* True if envp[0..n) sets the variable of entry "NAME=...". */
static bool env_has(char *const *envp, size_t n, const char *entry)
{
	size_t len = (size_t)(strchr(entry, '=') - entry) + 1;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], entry, len) == 0)
			return true;
	return false;
}

char *const *ml_proc_exec_env(char *const *envp, char **out, size_t cap, char *pre)
{
	if (!envp || (ml_config.follow && !ml_core_active))
		return envp;
	size_t n = 0, at = (size_t)-1;
	for (; envp[n]; n++)
		if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
			at = n;
	if (n + 2 + ML_PROC_SAVED_ENV_MAX > cap)
		return envp;
	bool changed = preload_entry(at == (size_t)-1 ? NULL : envp[at] + 11, pre,
				     ML_PROC_PRELOAD_MAX);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		out[k++] = i == at && changed ? pre : envp[i];
	if (changed && at == (size_t)-1)
		out[k++] = pre;
	if (ml_config.follow && (changed || at != (size_t)-1))
		for (uint32_t i = 0; i < n_saved_env; i++)
			if (!env_has(envp, n, saved_env[i])) {
				out[k++] = saved_env[i];
				changed = true;
			}
	if (!changed)
		return envp;
	out[k] = NULL;
	return out;
}

size_t ml_proc_env_slots(char *const *envp)
{
	size_t n = 0;
	while (envp && envp[n])
		n++;
	return n + 2 + ML_PROC_SAVED_ENV_MAX;	/* LD_PRELOAD, settings, the NULL */
}
