/* tests/cuda_double/fake_c10_cuda.c - an empty library named like PyTorch's
 * CUDA library (libc10_cuda.so): loading it makes a profile look like a
 * PyTorch process to the report, which then explains caching-allocator
 * segments. */
int ml_fake_c10_cuda(void)
{
	return 0;
}
