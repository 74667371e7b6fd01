/* core/procinfo.c - where this process stands, for the PROCESS section: the
 * run it belongs to (`memline run` names its program's pid in
 * MEMLINE_RUN_PID), its rank in a distributed job (torchrun, Open MPI,
 * MPICH / Intel MPI, PMIx, SLURM: read from the environment at start-up,
 * so a DataLoader worker forked by rank 3 is rank 3 too) and its host, so
 * that the profiles of a multi-node job gathered on a shared file system
 * can be told apart and compared rank by rank. */
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "core/internal.h"

static struct ml_fmt_process info = { .rank = -1, .local_rank = -1, .world_size = -1 };
static char host[65];

/* The environment's integer value of name, or -1. */
static int64_t env_int(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	long long n = strtoll(v, &end, 10);
	return *end || n < 0 ? -1 : (int64_t)n;
}

/* Rank variables of one launcher, most specific launcher first (torchrun
 * under SLURM: RANK is the worker's, SLURM_PROCID the node launcher's). */
static const struct {
	uint32_t source;
	const char *rank, *local_rank, *world_size;
} launchers[] = {
	{ ML_RANK_TORCH, "RANK", "LOCAL_RANK", "WORLD_SIZE" },
	{ ML_RANK_OPENMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
	  "OMPI_COMM_WORLD_SIZE" },
	{ ML_RANK_PMI, "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE" },
	{ ML_RANK_PMIX, "PMIX_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE" },
	{ ML_RANK_SLURM, "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS" },
};

void ml_procinfo_init(void)
{
	int64_t run = env_int("MEMLINE_RUN_PID");
	info.run_pid = run > 0 ? (uint64_t)run : 0;
	info.parent_pid = (uint64_t)getppid();
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		int64_t rank = env_int(launchers[i].rank);
		if (rank < 0)
			continue;
		info.rank = rank;
		info.local_rank = env_int(launchers[i].local_rank);
		info.world_size = env_int(launchers[i].world_size);
		info.rank_source = launchers[i].source;
		break;
	}
	struct utsname u;
	if (uname(&u) == 0) {
		size_t n = strnlen(u.nodename, sizeof(host) - 1);
		memcpy(host, u.nodename, n);
		host[n] = '\0';
	}
	info.host_len = (uint32_t)strlen(host);
}

void ml_procinfo_put_section(struct ml_writer *w)
{
	ml_writer_begin(w, ML_SEC_PROCESS);
	ml_writer_put(w, &info, sizeof(info));
	ml_writer_put(w, host, info.host_len);
	ml_writer_record(w);
	ml_writer_end(w);
}

void ml_procinfo_after_fork(void)
{
	info.parent_pid = (uint64_t)getppid();
}
