/* tests/torture/die_signals.c - one fork child per signal whose default
 * action ends the process (the POSIX ones, Linux's SIGSTKFLT and SIGPWR,
 * and real-time signals): each child allocates, prints, writes a file and
 * dies of its signal with the default action; each writes a profile that
 * says so.  The parent prints how each child ended.
 *
 * @profiles die_signals=27
 * @expect die_signals[forked=false] main allocs=1 alloc_bytes=64 leaked_bytes=64
 * @end die_signals[forked=false] exit 0
 * @expect die_signals[end_status=1] child allocs=2 alloc_bytes=1101 frees=1 freed_bytes=100 leaked_bytes=1001
 * @end die_signals[end_status=1] signal 1
 * @expect die_signals[end_status=2] child allocs=2 alloc_bytes=1102 frees=1 freed_bytes=100 leaked_bytes=1002
 * @end die_signals[end_status=2] signal 2
 * @expect die_signals[end_status=3] child allocs=2 alloc_bytes=1103 frees=1 freed_bytes=100 leaked_bytes=1003
 * @end die_signals[end_status=3] signal 3
 * @expect die_signals[end_status=4] child allocs=2 alloc_bytes=1104 frees=1 freed_bytes=100 leaked_bytes=1004
 * @end die_signals[end_status=4] signal 4
 * @expect die_signals[end_status=5] child allocs=2 alloc_bytes=1105 frees=1 freed_bytes=100 leaked_bytes=1005
 * @end die_signals[end_status=5] signal 5
 * @expect die_signals[end_status=6] child allocs=2 alloc_bytes=1106 frees=1 freed_bytes=100 leaked_bytes=1006
 * @end die_signals[end_status=6] signal 6
 * @expect die_signals[end_status=7] child allocs=2 alloc_bytes=1107 frees=1 freed_bytes=100 leaked_bytes=1007
 * @end die_signals[end_status=7] signal 7
 * @expect die_signals[end_status=8] child allocs=2 alloc_bytes=1108 frees=1 freed_bytes=100 leaked_bytes=1008
 * @end die_signals[end_status=8] signal 8
 * @expect die_signals[end_status=10] child allocs=2 alloc_bytes=1110 frees=1 freed_bytes=100 leaked_bytes=1010
 * @end die_signals[end_status=10] signal 10
 * @expect die_signals[end_status=11] child allocs=2 alloc_bytes=1111 frees=1 freed_bytes=100 leaked_bytes=1011
 * @end die_signals[end_status=11] signal 11
 * @expect die_signals[end_status=12] child allocs=2 alloc_bytes=1112 frees=1 freed_bytes=100 leaked_bytes=1012
 * @end die_signals[end_status=12] signal 12
 * @expect die_signals[end_status=13] child allocs=2 alloc_bytes=1113 frees=1 freed_bytes=100 leaked_bytes=1013
 * @end die_signals[end_status=13] signal 13
 * @expect die_signals[end_status=14] child allocs=2 alloc_bytes=1114 frees=1 freed_bytes=100 leaked_bytes=1014
 * @end die_signals[end_status=14] signal 14
 * @expect die_signals[end_status=15] child allocs=2 alloc_bytes=1115 frees=1 freed_bytes=100 leaked_bytes=1015
 * @end die_signals[end_status=15] signal 15
 * @expect die_signals[end_status=16] child allocs=2 alloc_bytes=1116 frees=1 freed_bytes=100 leaked_bytes=1016
 * @end die_signals[end_status=16] signal 16
 * @expect die_signals[end_status=24] child allocs=2 alloc_bytes=1124 frees=1 freed_bytes=100 leaked_bytes=1024
 * @end die_signals[end_status=24] signal 24
 * @expect die_signals[end_status=25] child allocs=2 alloc_bytes=1125 frees=1 freed_bytes=100 leaked_bytes=1025
 * @end die_signals[end_status=25] signal 25
 * @expect die_signals[end_status=26] child allocs=2 alloc_bytes=1126 frees=1 freed_bytes=100 leaked_bytes=1026
 * @end die_signals[end_status=26] signal 26
 * @expect die_signals[end_status=27] child allocs=2 alloc_bytes=1127 frees=1 freed_bytes=100 leaked_bytes=1027
 * @end die_signals[end_status=27] signal 27
 * @expect die_signals[end_status=29] child allocs=2 alloc_bytes=1129 frees=1 freed_bytes=100 leaked_bytes=1029
 * @end die_signals[end_status=29] signal 29
 * @expect die_signals[end_status=30] child allocs=2 alloc_bytes=1130 frees=1 freed_bytes=100 leaked_bytes=1030
 * @end die_signals[end_status=30] signal 30
 * @expect die_signals[end_status=31] child allocs=2 alloc_bytes=1131 frees=1 freed_bytes=100 leaked_bytes=1031
 * @end die_signals[end_status=31] signal 31
 * @expect die_signals[end_status=34] child allocs=2 alloc_bytes=1134 frees=1 freed_bytes=100 leaked_bytes=1034
 * @end die_signals[end_status=34] signal 34
 * @expect die_signals[end_status=35] child allocs=2 alloc_bytes=1135 frees=1 freed_bytes=100 leaked_bytes=1035
 * @end die_signals[end_status=35] signal 35
 * @expect die_signals[end_status=63] child allocs=2 alloc_bytes=1163 frees=1 freed_bytes=100 leaked_bytes=1063
 * @end die_signals[end_status=63] signal 63
 * @expect die_signals[end_status=64] child allocs=2 alloc_bytes=1164 frees=1 freed_bytes=100 leaked_bytes=1064
 * @end die_signals[end_status=64] signal 64
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void *kept;

static void child(int sig)
{
	char name[32];
	void *gone = malloc(100);
	kept = malloc((size_t)(1000 + sig));
	free(gone);
	snprintf(name, sizeof(name), "child.%d", sig);
	int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ssize_t n = write(fd, name, strlen(name));
		(void)n;
		close(fd);
	}
	printf("child %d dies\n", sig);
	fflush(stdout);
	sigset_t all;
	sigemptyset(&all);
	sigaddset(&all, sig);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	raise(sig);
	_exit(100);	/* not reached */
}

int main(void)
{
	static const int sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS,
		SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU,
		SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR, SIGSYS, 34, 35, 63, 64 };
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core);	/* no core files in the directory */
	void *mine = malloc(64);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int status;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			child(sigs[i]);
		waitpid(pid, &status, 0);
		if (WIFSIGNALED(status))
			printf("signal %d: killed by %d\n", sigs[i], WTERMSIG(status));
		else
			printf("signal %d: exit %d\n", sigs[i], WEXITSTATUS(status));
	}
	return mine ? 0 : 1;
}
