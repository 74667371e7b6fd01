/* lineprof/nvtx.c - NVTX v3 injection: the application's NVTX code loads the
 * library named by NVTX_INJECTION64_PATH (memline run points it at
 * libmemline.so) and calls its InitializeInjectionNvtx2 (lineprof/hooks.c),
 * which hands us the export table; we fill the core module's slots for the
 * range calls.  The ABI is declared here so the build needs no CUDA. */
#include <stdint.h>
#include <stddef.h>
#include "lineprof/internal.h"
#include "lineprof/nvtx.h"

/* From nvtx3/nvtxDetail/nvtxTypes.h (NVTX v3 ABI). */
typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;		/* array of pointers to function pointers */
typedef const void *(*nvtx_get_export_table)(uint32_t id);
struct nvtx_callbacks {
	size_t struct_size;
	int (*get_module_function_table)(int module, nvtx_table *out, unsigned int *out_size);
};
#define NVTX_ETID_CALLBACKS 1u
#define NVTX_CB_MODULE_CORE 1
#define CBID_RANGE_START_EX 4u
#define CBID_RANGE_START_A 5u
#define CBID_RANGE_END 7u
#define CBID_RANGE_PUSH_EX 8u
#define CBID_RANGE_PUSH_A 9u
#define CBID_RANGE_POP 11u

/* nvtxEventAttributes_t v2/v3: the message is at offset 40 (type at 32). */
struct nvtx_event_attributes {
	uint16_t version, size;
	uint32_t category;
	int32_t color_type;
	uint32_t color;
	int32_t payload_type;
	int32_t reserved0;
	uint64_t payload;
	int32_t message_type;	/* 1: ASCII */
	const void *message;
};
#define NVTX_MESSAGE_TYPE_ASCII 1

static __thread int tl_push_depth __attribute__((tls_model("initial-exec")));

static const char *attr_name(const struct nvtx_event_attributes *a)
{
	if (!a || a->size < offsetof(struct nvtx_event_attributes, message) + sizeof(void *) ||
	    a->message_type != NVTX_MESSAGE_TYPE_ASCII)
		return "(nvtx)";
	return a->message ? a->message : "(nvtx)";
}

static int push_a(const char *msg)
{
	ml_lp_region_push(msg, ML_REGION_NVTX);
	return tl_push_depth++;
}

static int push_ex(const struct nvtx_event_attributes *a)
{
	return push_a(attr_name(a));
}

static int pop(void)
{
	if (tl_push_depth <= 0)
		return -1;
	ml_lp_region_pop();
	return --tl_push_depth;
}

static uint64_t start_a(const char *msg)
{
	return ml_lp_range_start(msg, ML_REGION_NVTX);
}

static uint64_t start_ex(const struct nvtx_event_attributes *a)
{
	return start_a(attr_name(a));
}

static void end(uint64_t id)
{
	ml_lp_range_end(id);
}

static void set_slot(nvtx_table table, unsigned int size, unsigned int id, nvtx_fn fn)
{
	if (id < size && table[id])
		*table[id] = fn;
}

int ml_lp_nvtx_init(const void *get_export_table)
{
	nvtx_get_export_table get = (nvtx_get_export_table)get_export_table;
	if (!get)
		return 0;
	const struct nvtx_callbacks *cb = get(NVTX_ETID_CALLBACKS);
	nvtx_table table = NULL;
	unsigned int size = 0;
	if (!cb || cb->struct_size < sizeof(*cb) || !cb->get_module_function_table ||
	    !cb->get_module_function_table(NVTX_CB_MODULE_CORE, &table, &size) || !table)
		return 0;
	set_slot(table, size, CBID_RANGE_PUSH_A, (nvtx_fn)push_a);
	set_slot(table, size, CBID_RANGE_PUSH_EX, (nvtx_fn)push_ex);
	set_slot(table, size, CBID_RANGE_POP, (nvtx_fn)pop);
	set_slot(table, size, CBID_RANGE_START_A, (nvtx_fn)start_a);
	set_slot(table, size, CBID_RANGE_START_EX, (nvtx_fn)start_ex);
	set_slot(table, size, CBID_RANGE_END, (nvtx_fn)end);
	return 1;
}
