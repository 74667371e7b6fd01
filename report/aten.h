/* report/aten.h - PyTorch's ATen operators on symbolized stacks: which frame
 * is an operator's entry (at::_ops::<op>[_<overload>]::call, where
 * torch.profiler's RecordFunction is), its name as torch.profiler prints it
 * ("aten::add"), and which frame is PyTorch's CPU tensor allocator. */
#ifndef ML_REPORT_ATEN_H
#define ML_REPORT_ATEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/profile.h"
#include "report/symbolize.h"

struct ml_aten;

/* The op names of profile p: from its TORCH section's schemas when it has
 * them (exact), else from the C++ names alone (ml_aten_exact false).
 * Returns 0 and *out, or -ENOMEM.  p must outlive the result. */
int ml_aten_open(const struct ml_profile *p, struct ml_aten **out);
void ml_aten_close(struct ml_aten *a);

/* Whether names are exact: the profile has the operator schemas. */
bool ml_aten_exact(const struct ml_aten *a);

/* The op whose entry frame fr is (at::_ops::add_Tensor::call is op
 * "aten::add"), as an id from 1 to ml_aten_count, or 0 when fr is no op's
 * entry.  Overloads of one op share its id.  Without schemas the C++ id is
 * kept as the name: "aten::add_Tensor". */
uint32_t ml_aten_op(struct ml_aten *a, const struct ml_frame *fr);
/* How many op ids exist so far (ml_aten_op may make more). */
uint32_t ml_aten_count(const struct ml_aten *a);
/* Op id's name ("aten::add"), living as long as a; NULL for a bad id. */
const char *ml_aten_name(const struct ml_aten *a, uint32_t op);

/* The C++ operator id of an entry frame's function name ("add_Tensor" for
 * "at::_ops::add_Tensor::call(at::Tensor const&, ...)") into buf; false
 * when fn is no entry frame or the id does not fit.  For tests. */
bool ml_aten_cpp_id(const char *fn, char *buf, size_t len);

/* Whether fr is PyTorch's CPU tensor allocator (c10::alloc_cpu): the bytes
 * allocated under it are tensor storage, what torch.profiler counts. */
bool ml_aten_is_tensor_alloc(const struct ml_frame *fr);

#endif
