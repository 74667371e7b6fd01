/* common/sigsafe.c - async-signal-safe helpers (sigsafe.h). */
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/sigsafe.h"

bool ml_sigsafe_append(char *dst, size_t cap, size_t *pos, const char *src)
{
	size_t n = strlen(src);
	if (*pos + n + 1 > cap)
		return false;
	memcpy(dst + *pos, src, n + 1);
	*pos += n;
	return true;
}

void ml_sigsafe_utoa(char out[24], uint64_t v)
{
	char tmp[24];
	size_t n = 0, i = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		out[i++] = tmp[--n];
	out[i] = '\0';
}

bool ml_sigsafe_append_errno(char *dst, size_t cap, size_t *pos, int err)
{
	const char *desc = strerrordesc_np(err), *name = strerrorname_np(err);
	size_t start = *pos;
	char num[24];
	bool ok;
	if (desc && name)
		ok = ml_sigsafe_append(dst, cap, pos, desc) && ml_sigsafe_append(dst, cap, pos, " (") &&
		     ml_sigsafe_append(dst, cap, pos, name) && ml_sigsafe_append(dst, cap, pos, ")");
	else {
		ml_sigsafe_utoa(num, (uint64_t)(err < 0 ? -(int64_t)err : err));
		ok = ml_sigsafe_append(dst, cap, pos, "error ") &&
		     ml_sigsafe_append(dst, cap, pos, num);
	}
	if (!ok) {	/* as ml_sigsafe_append: dst unchanged */
		*pos = start;
		dst[start] = '\0';
	}
	return ok;
}

int ml_sigsafe_fd_private(int fd)
{
	struct rlimit rl;
	if (fd < 0 || syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) != 0)
		return fd;
	/* High, but within the first 1024 (a larger number would grow the
	 * kernel's descriptor table for nothing). */
	rlim_t top = rl.rlim_cur < 1024 ? rl.rlim_cur : 1024;
	if (top < 128)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - 64));
	if (high < 0)
		return fd;
	close(fd);
	return high;
}
