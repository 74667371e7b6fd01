/* tests/check_aten.c - ATen op names (report/aten.c) from the C++ entry
 * frames, with and without a profile's schemas, and the per-op sums
 * (report/aten_ops.c) on a hand-built aggregation: tensor storage and
 * other memory apart, free events subtracted, self to the innermost op,
 * total once per op, samples. */
#include "report/aten.h"
#include "report/aten_ops.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static const char *schemas[] = {
	"add", "Tensor", "add", "Scalar", "empty", "memory_format", "sum", "", "sum", "dim_IntList",
	"max_pool2d_with_indices_backward", "",
};

static struct ml_profile profile_with(bool with_schemas)
{
	struct ml_profile p;
	memset(&p, 0, sizeof(p));
	if (with_schemas) {
		p.torch.present = true;
		p.torch.n_schemas = sizeof(schemas) / sizeof(schemas[0]) / 2;
		p.torch.schemas = schemas;
	}
	return p;
}

static struct ml_frame frame(const char *fn)
{
	struct ml_frame f;
	memset(&f, 0, sizeof(f));
	f.function = fn;
	f.module = "/usr/lib/libtorch_cpu.so";
	return f;
}

static const char *op_of(struct ml_aten *a, const char *fn)
{
	struct ml_frame f = frame(fn);
	return ml_aten_name(a, ml_aten_op(a, &f));
}

START_TEST(cpp_ids)
{
	char id[64];
	ck_assert(ml_aten_cpp_id("at::_ops::add_Tensor::call(at::Tensor const&, at::Tensor const&, "
				 "c10::Scalar const&)", id, sizeof(id)));
	ck_assert_str_eq(id, "add_Tensor");
	ck_assert(ml_aten_cpp_id("at::_ops::mm::call", id, sizeof(id)));
	ck_assert_str_eq(id, "mm");
	ck_assert(!ml_aten_cpp_id("at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&)",
				  id, sizeof(id)));
	ck_assert(!ml_aten_cpp_id("at::_ops::mm::callx()", id, sizeof(id)));
	ck_assert(!ml_aten_cpp_id("at::native::mm(at::Tensor const&)", id, sizeof(id)));
	ck_assert(!ml_aten_cpp_id("at::_ops::::call()", id, sizeof(id)));
	ck_assert(!ml_aten_cpp_id("at::_ops::a_very_long_name::call()", id, 8));
	ck_assert(!ml_aten_cpp_id(NULL, id, sizeof(id)));
}
END_TEST

START_TEST(names_from_schemas)
{
	struct ml_profile p = profile_with(true);
	struct ml_aten *a = NULL;
	ck_assert_int_eq(ml_aten_open(&p, &a), 0);
	ck_assert(ml_aten_exact(a));
	ck_assert_str_eq(op_of(a, "at::_ops::add_Tensor::call(at::Tensor const&)"), "aten::add");
	ck_assert_str_eq(op_of(a, "at::_ops::add_Scalar::call(at::Tensor const&)"), "aten::add");
	ck_assert_str_eq(op_of(a, "at::_ops::sum_dim_IntList::call()"), "aten::sum");
	ck_assert_str_eq(op_of(a, "at::_ops::sum::call()"), "aten::sum");
	ck_assert_str_eq(op_of(a, "at::_ops::max_pool2d_with_indices_backward::call(at::Tensor)"),
			 "aten::max_pool2d_with_indices_backward");
	ck_assert_str_eq(op_of(a, "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)"),
			 "aten::empty");
	/* Overloads of one op share its id; the cache returns the same. */
	struct ml_frame f1 = frame("at::_ops::add_Tensor::call(at::Tensor const&)");
	struct ml_frame f2 = frame("at::_ops::add_Scalar::call(at::Tensor const&)");
	uint32_t id = ml_aten_op(a, &f1);
	ck_assert_uint_ne(id, 0);
	ck_assert_uint_eq(ml_aten_op(a, &f2), id);
	ck_assert_uint_eq(ml_aten_op(a, &f1), id);
	/* An id the schemas lack keeps its C++ id. */
	ck_assert_str_eq(op_of(a, "at::_ops::new_op_out::call()"), "aten::new_op_out");
	struct ml_frame other = frame("at::_ops::add_Tensor::redispatch(c10::DispatchKeySet)");
	ck_assert_uint_eq(ml_aten_op(a, &other), 0);
	struct ml_frame none = frame("main");
	ck_assert_uint_eq(ml_aten_op(a, &none), 0);
	ck_assert_ptr_null(ml_aten_name(a, 0));
	ck_assert_ptr_null(ml_aten_name(a, ml_aten_count(a) + 1));
	ml_aten_close(a);
}
END_TEST

START_TEST(names_without_schemas)
{
	struct ml_profile p = profile_with(false);
	struct ml_aten *a = NULL;
	ck_assert_int_eq(ml_aten_open(&p, &a), 0);
	ck_assert(!ml_aten_exact(a));
	ck_assert_str_eq(op_of(a, "at::_ops::add_Tensor::call(at::Tensor const&)"), "aten::add_Tensor");
	ck_assert_str_eq(op_of(a, "at::_ops::mm::call(at::Tensor const&)"), "aten::mm");
	ml_aten_close(a);
}
END_TEST

START_TEST(tensor_allocator)
{
	struct ml_frame f = frame("c10::alloc_cpu(unsigned long)");
	ck_assert(ml_aten_is_tensor_alloc(&f));
	f.function = "c10::alloc_cpu_other(unsigned long)";
	ck_assert(!ml_aten_is_tensor_alloc(&f));
	f.function = NULL;
	ck_assert(!ml_aten_is_tensor_alloc(&f));
}
END_TEST

/* ---- per-op sums ---- */

static struct ml_frame F_ALLOC, F_EMPTY, F_ADD, F_MALLOCER, F_MAIN;

/* Gives st an amount of kind (kinds added in ascending order), from
 * store[]: a stack keeps only its own kinds' amounts. */
static void add_kind(struct ml_agg_stack *st, struct ml_amount *store, int kind, uint64_t allocs,
		     uint64_t bytes)
{
	int n = __builtin_popcount(st->kinds);
	memset(&store[n], 0, sizeof(store[n]));
	store[n].allocs = allocs;
	store[n].alloc_bytes = bytes;
	st->kinds |= 1u << kind;
	st->amounts = store;
}

START_TEST(op_sums)
{
	F_ALLOC = frame("c10::alloc_cpu(unsigned long)");
	F_EMPTY = frame("at::_ops::empty_memory_format::call()");
	F_ADD = frame("at::_ops::add_Tensor::call()");
	F_MALLOCER = frame("std::vector<int>::reserve(unsigned long)");
	F_MAIN = frame("main");
	/* 0: a tensor of add's output, through empty; 1: a tensor add
	 * allocates itself; 2: add's vector; 3: a tensor freed inside add;
	 * 4: a tensor outside any op; 5: add nested in add (counted once). */
	const struct ml_frame *s0[] = { &F_ALLOC, &F_EMPTY, &F_ADD, &F_MAIN };
	const struct ml_frame *s1[] = { &F_ALLOC, &F_ADD, &F_MAIN };
	const struct ml_frame *s2[] = { &F_MALLOCER, &F_ADD, &F_MAIN };
	const struct ml_frame *s3[] = { &F_ADD, &F_MAIN };
	const struct ml_frame *s4[] = { &F_ALLOC, &F_MAIN };
	const struct ml_frame *s5[] = { &F_ALLOC, &F_ADD, &F_ADD, &F_MAIN };
	struct ml_agg_stack st[6];
	memset(st, 0, sizeof(st));
	const struct ml_frame **frames[] = { s0, s1, s2, s3, s4, s5 };
	size_t n[] = { 4, 3, 3, 2, 2, 4 };
	for (int i = 0; i < 6; i++) {
		st[i].frames = frames[i];
		st[i].n_frames = n[i];
	}
	struct ml_amount store[6][2];
	add_kind(&st[0], store[0], ML_KIND_HEAP, 1, 1000);
	add_kind(&st[1], store[1], ML_KIND_HEAP, 1, 300);
	add_kind(&st[2], store[2], ML_KIND_HEAP, 2, 64);
	add_kind(&st[3], store[3], ML_KIND_TORCH_CPU_FREED, 1, 300);
	add_kind(&st[4], store[4], ML_KIND_HEAP, 1, 77);
	add_kind(&st[5], store[5], ML_KIND_HEAP, 1, 5);
	add_kind(&st[5], store[5], ML_KIND_TORCH_CUDA, 1, 512);
	const struct ml_frame *sm0[] = { &F_ADD, &F_MAIN };
	const struct ml_frame *sm1[] = { &F_MAIN };
	struct ml_agg_sample samples[2] = { { sm0, 2, 7 }, { sm1, 1, 3 } };
	struct ml_profile p = profile_with(true);
	p.n_samples = 2;
	struct ml_agg a;
	memset(&a, 0, sizeof(a));
	a.profile = &p;
	a.stacks = st;
	a.n_stacks = 6;
	a.samples = samples;

	struct ml_aten_ops *o = NULL;
	ck_assert_int_eq(ml_aten_ops_build(&a, &o), 0);
	ck_assert(o->exact);
	const struct ml_aten_row *add = NULL, *empty = NULL;
	for (size_t i = 0; i < o->n_rows; i++) {
		if (strcmp(o->rows[i].f.name, "aten::add") == 0)
			add = &o->rows[i];
		if (strcmp(o->rows[i].f.name, "aten::empty") == 0)
			empty = &o->rows[i];
	}
	ck_assert_ptr_nonnull(add);
	ck_assert_ptr_nonnull(empty);
	ck_assert_uint_eq(ML_AGG_SELF(&empty->f, ML_KIND_HEAP).alloc_bytes, 1000);
	ck_assert_uint_eq(ML_AGG_TOTAL(&empty->f, ML_KIND_HEAP).alloc_bytes, 1000);
	ck_assert_uint_eq(ML_AGG_SELF(&add->f, ML_KIND_HEAP).alloc_bytes, 305);
	ck_assert_uint_eq(ML_AGG_TOTAL(&add->f, ML_KIND_HEAP).alloc_bytes, 1305);
	ck_assert_uint_eq(ML_AGG_SELF(&add->f, ML_KIND_TORCH_CPU_FREED).alloc_bytes, 300);
	ck_assert_uint_eq(ML_AGG_TOTAL(&add->f, ML_KIND_TORCH_CPU_FREED).alloc_bytes, 300);
	ck_assert_uint_eq(ML_AGG_SELF(&add->f, ML_KIND_TORCH_CUDA).alloc_bytes, 512);
	ck_assert_uint_eq(add->other_self[ML_KIND_HEAP].alloc_bytes, 64);
	ck_assert_uint_eq(add->other_total[ML_KIND_HEAP].allocs, 2);
	ck_assert_uint_eq(empty->other_total[ML_KIND_HEAP].alloc_bytes, 0);
	ck_assert_uint_eq(o->tensor_total.alloc_bytes, 1000 + 300 + 77 + 5);
	ck_assert_uint_eq(o->outside[ML_KIND_HEAP].alloc_bytes, 77);
	ck_assert_uint_eq(add->f.self_samples, 7);
	ck_assert_uint_eq(add->f.total_samples, 7);
	ck_assert_uint_eq(empty->f.total_samples, 0);
	ck_assert_uint_eq(o->outside_samples, 3);
	ck_assert_ptr_eq(ml_aten_row_of(&add->f), add);
	ml_aten_ops_free(o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("aten");
	TCase *tc = tcase_create("aten");
	tcase_add_test(tc, cpp_ids);
	tcase_add_test(tc, names_from_schemas);
	tcase_add_test(tc, names_without_schemas);
	tcase_add_test(tc, tensor_allocator);
	tcase_add_test(tc, op_sums);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
