/* ht_libc_internal.c - peer: heaptrack's tests/manual/libc_leaks.c: glibc
 * allocates for itself (time zone data, locale) on the program's behalf. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
	setenv("TZ", "UTC", 1);
	time_t t = 86400 * 365;
	struct tm tm;
	gmtime_r(&t, &tm);
	localtime_r(&t, &tm);
	char buf[64];
	strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
	setlocale(LC_ALL, "C");
	printf("%s\n", buf);
	return 0;
}
