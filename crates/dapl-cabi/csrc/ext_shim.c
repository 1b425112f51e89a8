/*
 * The DAT IB extension slot (handle_extendedop_func) takes a C va_list, which stable Rust
 * cannot read. This shim reads the arguments of each operation we implement and calls a
 * plain Rust function with them; other operations are DAT_NOT_IMPLEMENTED.
 */
#include <stdarg.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

/* Implemented in Rust (src/ext.rs). */
extern DAT_RETURN daplrs_ext_rdma_write_immed(DAT_HANDLE ep, DAT_COUNT segments,
                                              const DAT_LMR_TRIPLET *local,
                                              DAT_UINT64 cookie, const DAT_RMR_TRIPLET *remote,
                                              DAT_UINT32 immediate, DAT_COMPLETION_FLAGS flags);

DAT_RETURN daplrs_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
	switch ((int)op) {
	case DAT_IB_RDMA_WRITE_IMMED_OP: {
		DAT_COUNT segments = va_arg(args, DAT_COUNT);
		DAT_LMR_TRIPLET *local = va_arg(args, DAT_LMR_TRIPLET *);
		DAT_DTO_COOKIE cookie = va_arg(args, DAT_DTO_COOKIE);
		DAT_RMR_TRIPLET *remote = va_arg(args, DAT_RMR_TRIPLET *);
		DAT_UINT32 immediate = va_arg(args, DAT_UINT32);
		DAT_COMPLETION_FLAGS flags = va_arg(args, DAT_COMPLETION_FLAGS);
		return daplrs_ext_rdma_write_immed(handle, segments, local, cookie.as_64, remote,
						   immediate, flags);
	}
	default:
		return DAT_CLASS_ERROR | DAT_NOT_IMPLEMENTED;
	}
}
