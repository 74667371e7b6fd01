/* vg_leak_shapes.c - peer: valgrind memcheck's leak tests (leak-cases,
 * leak-cycle, leak-tree): blocks lost outright, lost behind other lost
 * blocks, in cycles, reachable only through an interior pointer, and still
 * reachable from a global.  memline does not scan memory: every block not
 * freed is "in use at exit", as valgrind's total says. */
#include <stdio.h>
#include <stdlib.h>

struct node {
	struct node *left, *right;
	char pad[40];
};

static struct node *global_root;
static char *interior;

static struct node *tree(int depth)
{
	struct node *n = calloc(1, sizeof(*n));
	if (depth > 0) {
		n->left = tree(depth - 1);
		n->right = tree(depth - 1);
	}
	return n;
}

static void cycle(int len)
{
	struct node *first = malloc(sizeof(*first)), *prev = first;
	for (int i = 1; i < len; i++) {
		struct node *n = malloc(sizeof(*n));
		prev->left = n;
		prev = n;
	}
	prev->left = first;
}

static void free_tree(struct node *n)
{
	if (!n)
		return;
	free_tree(n->left);
	free_tree(n->right);
	free(n);
}

int main(void)
{
	struct node *lost = tree(3);		/* 15 blocks: 1 lost, 14 behind it */
	(void)lost;
	cycle(5);				/* 5 blocks in a cycle */
	global_root = tree(2);			/* 7 blocks still reachable */
	interior = (char *)malloc(200) + 100;	/* reachable only inside */
	struct node *gone = tree(4);		/* freed: 31 blocks */
	free_tree(gone);
	struct node *half = tree(2);		/* free the root's left half only */
	free_tree(half->left);
	half->left = NULL;
	printf("shapes done\n");
	return 0;
}
