/* vg_nss_lookup.c - peer: valgrind's tests of libc calls that load modules
 * behind the program's back (NSS: getpwuid, getgrgid, getservbyname). */
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>

int main(void)
{
	struct passwd *pw = getpwuid(0);
	struct group *gr = getgrgid(0);
	struct servent *se = getservbyname("ssh", "tcp");
	printf("%s %s %d\n", pw ? pw->pw_name : "?", gr ? gr->gr_name : "?", se != NULL);
	endpwent();
	endgrent();
	endservent();
	return 0;
}
