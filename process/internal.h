/* process/internal.h - private to process/: the environment an exec'd or
 * spawned program gets (exec_env.c), for the exported hooks (hooks.c). */
#ifndef ML_PROCESS_INTERNAL_H
#define ML_PROCESS_INTERNAL_H

#include <stddef.h>

/* The longest LD_PRELOAD entry we build. */
#define ML_PROC_PRELOAD_MAX 8192u
/* MEMLINE_* settings passed on to exec'd programs, at most. */
#define ML_PROC_SAVED_ENV_MAX 32u

/* At start-up (the room's start callback): remembers libmemline's path and
 * the MEMLINE_* settings this process started with. */
void ml_proc_env_start(void);

/* Slots exec_env needs for envp: its entries, LD_PRELOAD, the settings and
 * the NULL. */
size_t ml_proc_env_slots(char *const *envp);

/* envp as the exec'd program gets it: LD_PRELOAD without libmemline when
 * not following; when following, with libmemline first (a program such as
 * `env LD_PRELOAD=x prog` replaces ours, and the next program must still
 * be profiled, as valgrind --trace-children does) and the MEMLINE_*
 * settings it lacks (env -i).  Returns a copy in out (cap slots, from
 * ml_proc_env_slots) with the LD_PRELOAD entry in pre (ML_PROC_PRELOAD_MAX
 * bytes), or envp itself when nothing changes.  No malloc: the caller's
 * stack holds it all (vfork children exec through here). */
char *const *ml_proc_exec_env(char *const *envp, char **out, size_t cap, char *pre);

/* The environment of an exec'd program, on the caller's stack. */
#define ML_PROC_EXEC_ENV(envp, name) \
	char pre_##name[ML_PROC_PRELOAD_MAX]; \
	char *slots_##name[ml_proc_env_slots(envp)]; \
	char *const *name = ml_proc_exec_env(envp, slots_##name, ml_proc_env_slots(envp), \
					     pre_##name)

/* RTLD_DEEPBIND libraries (deepbind.c).  At start-up: finds the real
 * dlopen (ml_proc_real_dlopen, for hooks.c's jump). */
void ml_proc_deepbind_start(void);
extern void *ml_proc_real_dlopen;
/* dlopen(file, mode) called from caller, when hooks.c does not jump to the
 * real one: with RTLD_DEEPBIND, opens file as the caller would have and
 * points the loaded modules' references to libmemline's exports at them. */
void *ml_proc_dlopen_slow(const char *file, int mode, void *caller);

#endif
