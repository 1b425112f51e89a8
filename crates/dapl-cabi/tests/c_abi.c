/*
 * Conformance of libdaplrs.so's C ABI, used as a C consumer uses it: through the installed
 * libdat2 (dat_ia_open by the dat.conf name in DAT_OVERRIDE, then the public DAT API only;
 * for dat_ep_post_send_with_invalidate, which libdat2 declares but does not export, the
 * DAT_EP_POST_SEND_WITH_INVALIDATE macro of <dat2/udat_redirection.h>, which calls the
 * provider's vtable as libdat2's own functions do). Driven by tests/c_abi.rs, which builds and
 * runs this program.
 *
 * Usage: c_abi <ia_name>. Prints one line per check, "ok <group>.<name>" or
 * "FAIL <group>.<name>: got 0x.. want 0x..", then "summary: <n> checks, <m> failed", and exits
 * 1 if any check failed. A failed setup step (that later checks depend on) is a FAIL and ends
 * the program at once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dat2/udat.h>
#include <dat2/udat_redirection.h> /* DAT_EP_POST_SEND_WITH_INVALIDATE: no libdat2 function */
#include <dat2/dat_ib_extensions.h>

typedef unsigned long long u64;

static int checks, failures;

static int check(const char *name, u64 got, u64 want)
{
	checks++;
	if (got == want) {
		printf("ok %s\n", name);
		return 1;
	}
	failures++;
	printf("FAIL %s: got 0x%llx want 0x%llx\n", name, got, want);
	return 0;
}

static int finish(void)
{
	printf("summary: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}

/* got == want */
#define CHECK(name, got, want) check(name, (u64)(got), (u64)(want))
/* a condition; got is 0 when it is false */
#define CHECK_TRUE(name, cond) check(name, (u64)!!(cond), 1)
/* the error type (class and subtype bits dropped) */
#define CHECK_TYPE(name, ret, type) check(name, (u64)DAT_GET_TYPE(ret), (u64)(type))
/* a setup step later checks depend on: on failure the program ends */
#define REQUIRE(name, ret) \
	do { \
		if (!check(name, (u64)(ret), DAT_SUCCESS)) \
			exit(finish() | 1); \
	} while (0)

#define WAIT_US (5 * 1000 * 1000) /* for events that must come */
#define QUIET_US (200 * 1000)     /* for events that must not */

static DAT_RETURN wait_event(DAT_EVD_HANDLE evd, DAT_TIMEOUT us, DAT_EVENT *ev)
{
	DAT_COUNT nmore;
	memset(ev, 0, sizeof(*ev));
	return dat_evd_wait(evd, us, 1, ev, &nmore);
}

static long rss_pages(void)
{
	long size = 0, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = -1;
		fclose(f);
	}
	return resident;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static DAT_RETURN evd(DAT_IA_HANDLE ia, DAT_COUNT qlen, DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *out)
{
	return dat_evd_create(ia, qlen, DAT_HANDLE_NULL, flags, out);
}

static DAT_RETURN lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *p, DAT_VLEN len,
		      DAT_LMR_HANDLE *h, DAT_LMR_CONTEXT *lc, DAT_RMR_CONTEXT *rc)
{
	DAT_REGION_DESCRIPTION region;
	region.for_va = p;
	return dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, DAT_MEM_PRIV_ALL_FLAG,
			      DAT_VA_TYPE_VA, h, lc, rc, NULL, NULL);
}

static DAT_DTO_COOKIE cookie(u64 v)
{
	DAT_DTO_COOKIE c;
	c.as_64 = v;
	return c;
}

/* ia_query: the attributes consumers and libdat2 rely on (contract 1.5, 4) */
static void ia_query_checks(DAT_IA_HANDLE ia, DAT_EVD_HANDLE async_evd)
{
	DAT_IA_ATTR a;
	DAT_PROVIDER_ATTR p;
	DAT_EVD_HANDLE q_evd = DAT_HANDLE_NULL;
	memset(&a, 0, sizeof(a));
	memset(&p, 0, sizeof(p));
	REQUIRE("ia_query.all_masks",
		dat_ia_query(ia, &q_evd, DAT_IA_FIELD_ALL, &a, DAT_PROVIDER_FIELD_ALL, &p));
	CHECK("ia_query.async_evd_matches_ia_open", q_evd, async_evd);
	struct sockaddr_in *sin = (struct sockaddr_in *)a.ia_address_ptr;
	if (CHECK_TRUE("ia_query.ia_address_ptr_non_null", sin != NULL)) {
		CHECK("ia_query.ia_address_af_inet", sin->sin_family, AF_INET);
		CHECK("ia_query.ia_address_127_0_0_1", ntohl(sin->sin_addr.s_addr), 0x7f000001);
	}
	CHECK_TRUE("ia_query.max_iov_segments_per_dto_at_least_4", a.max_iov_segments_per_dto >= 4);
	CHECK("ia_query.extension_supported_ib", a.extension_supported, DAT_EXTENSION_IB);
	CHECK("ia_query.dapl_version_major_2", p.dapl_version_major, 2);
	CHECK("ia_query.dapl_version_minor_0", p.dapl_version_minor, 0);
	CHECK("ia_query.is_thread_safe_false", p.is_thread_safe, DAT_FALSE);
	int rdma_read = 0;
	for (int i = 0; i < p.num_provider_specific_attr; i++) {
		const DAT_NAMED_ATTR *n = &p.provider_specific_attr[i];
		if (n->name && n->value && !strcmp(n->name, "DAT_IB_RDMA_READ"))
			rdma_read = !strcmp(n->value, "TRUE");
	}
	CHECK_TRUE("ia_query.named_attr_dat_ib_rdma_read_true", rdma_read);
	CHECK("ia_query.null_outputs_with_zero_masks_succeed",
	      dat_ia_query(ia, NULL, 0, NULL, 0, NULL), DAT_SUCCESS);
	CHECK_TYPE("ia_query.null_ia_attr_with_mask_all_is_invalid_parameter",
		   dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, NULL, 0, NULL), DAT_INVALID_PARAMETER);
}

/* Objects with no connection: handle validation, EVD emptiness, NULL outputs, memory, PZ use */
static void object_checks(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE dto, conn;
	DAT_EP_HANDLE ep, ep2;
	DAT_EVENT ev;
	DAT_PSP_PARAM psp_param;
	DAT_LMR_HANDLE l;
	DAT_LMR_CONTEXT lc;
	static char small[4096];

	REQUIRE("setup.pz_create", dat_pz_create(ia, &pz));
	REQUIRE("setup.evd_create_dto", evd(ia, 8, DAT_EVD_DTO_FLAG, &dto));
	REQUIRE("setup.evd_create_conn", evd(ia, 8, DAT_EVD_CONNECTION_FLAG, &conn));

	/* an empty EVD */
	CHECK("evd_empty.dequeue_is_bare_dat_queue_empty", dat_evd_dequeue(dto, &ev),
	      DAT_QUEUE_EMPTY);
	CHECK_TYPE("evd_empty.wait_0us_is_timeout_expired", wait_event(dto, 0, &ev),
		   DAT_TIMEOUT_EXPIRED);
	double t0 = now_ms();
	CHECK_TYPE("evd_empty.wait_10000us_is_timeout_expired", wait_event(dto, 10000, &ev),
		   DAT_TIMEOUT_EXPIRED);
	double waited = now_ms() - t0;
	CHECK_TRUE("evd_empty.wait_10000us_waits_about_10ms", waited >= 9 && waited < 2000);

	/* a software event posted from an event whose other fields are left unset (the
	 * provider reads the number and the software data pointer only), and a CNO's query */
	{
		DAT_EVENT se, got;
		DAT_EVD_HANDLE sw;
		static int marker;
		REQUIRE("setup.evd_create_software", evd(ia, 8, DAT_EVD_SOFTWARE_FLAG, &sw));
		memset(&se, 0xA5, sizeof(se)); /* stands for storage the caller did not initialise */
		se.event_number = DAT_SOFTWARE_EVENT;
		se.event_data.software_event_data.pointer = &marker;
		CHECK("post_se.partly_initialised_software_event", dat_evd_post_se(sw, &se),
		      DAT_SUCCESS);
		CHECK("post_se.dequeued", dat_evd_dequeue(sw, &got), DAT_SUCCESS);
		CHECK("post_se.number", got.event_number, DAT_SOFTWARE_EVENT);
		CHECK("post_se.pointer", (u64)(uintptr_t)got.event_data.software_event_data.pointer,
		      (u64)(uintptr_t)&marker);
		se.event_number = DAT_DTO_COMPLETION_EVENT;
		CHECK_TYPE("post_se.other_event_is_invalid_parameter", dat_evd_post_se(sw, &se),
			   DAT_INVALID_PARAMETER);
		CHECK("post_se.nothing_queued", dat_evd_dequeue(sw, &got), DAT_QUEUE_EMPTY);
		CHECK("setup.evd_free_software", dat_evd_free(sw), DAT_SUCCESS);

		DAT_CNO_HANDLE cno;
		DAT_CNO_PARAM cp;
		DAT_OS_WAIT_PROXY_AGENT agent = {0};
		REQUIRE("setup.cno_create", dat_cno_create(ia, agent, &cno));
		memset(&cp, 0xA5, sizeof(cp));
		CHECK("cno_query.success", dat_cno_query(cno, DAT_CNO_FIELD_ALL, &cp), DAT_SUCCESS);
		CHECK("cno_query.ia_handle_is_libdat2s", (u64)(uintptr_t)cp.ia_handle,
		      (u64)(uintptr_t)ia);
		CHECK("cno_query.proxy_none", cp.proxy_type, DAT_PROXY_TYPE_NONE);
		CHECK("setup.cno_free", dat_cno_free(cno), DAT_SUCCESS);
	}

	/* a handle of the wrong kind, passed where another kind is expected */
	CHECK_TYPE("wrong_kind.pz_free_of_evd", dat_pz_free(dto), DAT_INVALID_HANDLE);
	CHECK_TYPE("wrong_kind.psp_query_of_evd", dat_psp_query(dto, DAT_PSP_FIELD_ALL, &psp_param),
		   DAT_INVALID_HANDLE);
	CHECK_TYPE("wrong_kind.ep_create_with_evd_as_pz",
		   dat_ep_create(ia, dto, dto, dto, conn, NULL, &ep2), DAT_INVALID_HANDLE);
	CHECK_TYPE("wrong_kind.lmr_free_of_pz", dat_lmr_free(pz), DAT_INVALID_HANDLE);
	CHECK_TYPE("wrong_kind.evd_dequeue_of_pz", dat_evd_dequeue(pz, &ev), DAT_INVALID_HANDLE);
	CHECK("wrong_kind.evd_still_alive_after_pz_free_of_it", dat_evd_dequeue(dto, &ev),
	      DAT_QUEUE_EMPTY);

	/* NULL outputs: optional ones accepted, required ones refused */
	CHECK_TYPE("null_out.pz_create_null_handle_is_invalid_parameter", dat_pz_create(ia, NULL),
		   DAT_INVALID_PARAMETER);
	CHECK_TYPE("null_out.evd_create_null_handle_is_invalid_parameter",
		   evd(ia, 8, DAT_EVD_DTO_FLAG, NULL), DAT_INVALID_PARAMETER);
	CHECK("null_out.lmr_create_null_rmr_context_length_address",
	      lmr(ia, pz, small, sizeof(small), &l, &lc, NULL), DAT_SUCCESS);
	REQUIRE("setup.ep_create", dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep));
	CHECK("null_out.ep_get_status_all_null", dat_ep_get_status(ep, NULL, NULL, NULL),
	      DAT_SUCCESS);
	DAT_EP_STATE st = (DAT_EP_STATE)-1; /* not a state: the provider must write it */
	CHECK("null_out.ep_get_status_state_only", dat_ep_get_status(ep, &st, NULL, NULL),
	      DAT_SUCCESS);
	CHECK("null_out.ep_get_status_state_unconnected", st, DAT_EP_STATE_UNCONNECTED);

	/* consumer context and handle type on each kind (the IA through libdat2's index) */
	struct {
		const char *ctx_name, *type_name;
		DAT_HANDLE h;
		DAT_HANDLE_TYPE type;
	} kinds[] = {
		{"handle_info.context_round_trips_ia", "handle_info.handle_type_ia", ia,
		 DAT_HANDLE_TYPE_IA},
		{"handle_info.context_round_trips_ep", "handle_info.handle_type_ep", ep,
		 DAT_HANDLE_TYPE_EP},
		{"handle_info.context_round_trips_evd", "handle_info.handle_type_evd", dto,
		 DAT_HANDLE_TYPE_EVD},
		{"handle_info.context_round_trips_pz", "handle_info.handle_type_pz", pz,
		 DAT_HANDLE_TYPE_PZ},
		{"handle_info.context_round_trips_lmr", "handle_info.handle_type_lmr", l,
		 DAT_HANDLE_TYPE_LMR},
	};
	for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		DAT_CONTEXT set, got;
		DAT_HANDLE_TYPE t = (DAT_HANDLE_TYPE)-1;
		set.as_64 = 0x5eed0000ull + i;
		got.as_64 = 0;
		DAT_RETURN r1 = dat_set_consumer_context(kinds[i].h, set);
		DAT_RETURN r2 = dat_get_consumer_context(kinds[i].h, &got);
		CHECK(kinds[i].ctx_name, (r1 || r2) ? (u64)(r1 ? r1 : r2) : got.as_64, set.as_64);
		DAT_RETURN r3 = dat_get_handle_type(kinds[i].h, &t);
		CHECK(kinds[i].type_name, r3 ? (u64)r3 : (u64)t, kinds[i].type);
	}

	/* LMR length rules: 0 is refused, 1 GiB of untouched NORESERVE memory is registered lazily */
	DAT_LMR_HANDLE l0;
	CHECK_TYPE("lmr.length_0_is_length_error", lmr(ia, pz, small, 0, &l0, &lc, NULL),
		   DAT_LENGTH_ERROR);
	size_t gib = (size_t)1 << 30;
	void *big = mmap(NULL, gib, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (CHECK_TRUE("setup.mmap_1gib", big != MAP_FAILED)) {
		long before = rss_pages();
		DAT_LMR_HANDLE lb;
		DAT_RMR_CONTEXT rc;
		DAT_VLEN reg_len = 0;
		DAT_VADDR reg_addr = 0;
		DAT_REGION_DESCRIPTION region;
		region.for_va = big;
		DAT_RETURN r = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, gib, pz,
					      DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lb, &lc, &rc,
					      &reg_len, &reg_addr);
		long grown = (rss_pages() - before) * sysconf(_SC_PAGESIZE);
		if (CHECK("lmr.create_1gib_noreserve", r, DAT_SUCCESS)) {
			CHECK_TRUE("lmr.create_1gib_rss_grows_under_4mib",
				   before >= 0 && grown < (4 << 20));
			CHECK_TRUE("lmr.registered_length_covers_1gib", reg_len >= gib);
			CHECK("lmr.registered_address_is_va", reg_addr, (uintptr_t)big);
			CHECK("lmr.free_1gib", dat_lmr_free(lb), DAT_SUCCESS);
		}
		munmap(big, gib);
	}

	/* PZ in use: by an LMR, by an EP */
	CHECK_TYPE("pz_in_use.pz_free_with_lmr_and_ep_is_invalid_state", dat_pz_free(pz),
		   DAT_INVALID_STATE);
	CHECK("setup.lmr_free", dat_lmr_free(l), DAT_SUCCESS);
	CHECK_TYPE("pz_in_use.pz_free_with_ep_is_invalid_state", dat_pz_free(pz),
		   DAT_INVALID_STATE);
	CHECK("setup.ep_free", dat_ep_free(ep), DAT_SUCCESS);
	DAT_PZ_HANDLE pz2;
	REQUIRE("setup.pz_create_2", dat_pz_create(ia, &pz2));
	REQUIRE("setup.lmr_create_on_pz_2", lmr(ia, pz2, small, sizeof(small), &l, &lc, NULL));
	CHECK_TYPE("pz_in_use.pz_free_with_lmr_is_invalid_state", dat_pz_free(pz2),
		   DAT_INVALID_STATE);
	CHECK("pz_in_use.lmr_free", dat_lmr_free(l), DAT_SUCCESS);
	CHECK("pz_in_use.pz_free_once_unused", dat_pz_free(pz), DAT_SUCCESS);
	CHECK("pz_in_use.pz_free_once_lmr_freed", dat_pz_free(pz2), DAT_SUCCESS);

	/* freed handles: every later use is DAT_INVALID_HANDLE */
	CHECK_TYPE("freed.pz_free_twice", dat_pz_free(pz), DAT_INVALID_HANDLE);
	CHECK_TYPE("freed.ep_create_with_freed_pz",
		   dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep2), DAT_INVALID_HANDLE);
	CHECK_TYPE("freed.lmr_free_twice", dat_lmr_free(l), DAT_INVALID_HANDLE);
	CHECK_TYPE("freed.ep_get_status_after_ep_free", dat_ep_get_status(ep, NULL, NULL, NULL),
		   DAT_INVALID_HANDLE);
	CHECK("setup.evd_free", dat_evd_free(dto), DAT_SUCCESS);
	CHECK_TYPE("freed.evd_dequeue_after_evd_free", dat_evd_dequeue(dto, &ev),
		   DAT_INVALID_HANDLE);
	CHECK_TYPE("freed.evd_free_twice", dat_evd_free(dto), DAT_INVALID_HANDLE);
	CHECK("setup.evd_free_conn", dat_evd_free(conn), DAT_SUCCESS);

	/* Handle slots are reused after a quarantine (a long-running program does not grow), and
	 * a stale handle stays invalid after its slot was reused. */
	enum { CYCLES = 3000 };
	static uintptr_t seen[CYCLES];
	int distinct = 0, ok_cycles = 0;
	for (int i = 0; i < CYCLES; i++) {
		DAT_PZ_HANDLE p;
		if (dat_pz_create(ia, &p) != DAT_SUCCESS)
			break;
		uintptr_t slot = (uintptr_t)p & ~(uintptr_t)63;
		int j;
		for (j = 0; j < distinct && seen[j] != slot; j++)
			;
		if (j == distinct)
			seen[distinct++] = slot;
		if (dat_pz_free(p) == DAT_SUCCESS)
			ok_cycles++;
	}
	CHECK("freed.pz_create_free_cycles", ok_cycles, CYCLES);
	CHECK_TRUE("freed.handle_slots_are_reused_after_quarantine", distinct < 1200);
	CHECK_TYPE("freed.stale_pz_after_slot_reuse", dat_pz_free(pz), DAT_INVALID_HANDLE);
	CHECK_TYPE("freed.stale_evd_after_slot_reuse", dat_evd_dequeue(dto, &ev),
		   DAT_INVALID_HANDLE);
}

/* A DTO completion: event number, status, length, cookie, EP; returns 1 if all matched */
static int check_dto(const char *what, DAT_EVD_HANDLE evd, int number,
		     DAT_EP_HANDLE ep, u64 ck, DAT_COUNT len, DAT_EVENT *ev)
{
	char name[128];
	const DAT_DTO_COMPLETION_EVENT_DATA *d = &ev->event_data.dto_completion_event_data;
	int ok = 1;
#define SUB(field, got, want) \
	(snprintf(name, sizeof(name), "%s_%s", what, field), ok &= CHECK(name, got, want))
	if (!SUB("event", wait_event(evd, WAIT_US, ev), DAT_SUCCESS))
		return 0;
	SUB("event_number", ev->event_number, number);
	SUB("status", d->status, DAT_DTO_SUCCESS);
	SUB("transfered_length", d->transfered_length, len);
	SUB("cookie", d->user_cookie.as_64, ck);
	SUB("ep_handle", d->ep_handle, ep);
#undef SUB
	return ok;
}

static void connection_checks(DAT_IA_HANDLE ia)
{
	DAT_PZ_HANDLE pz;
	DAT_EVD_HANDLE cr_evd, conn_a, conn_b, dto_a, dto_b;
	DAT_EP_HANDLE ep_a, ep_b;
	DAT_PSP_HANDLE psp;
	DAT_LMR_HANDLE lmr_a, lmr_b;
	DAT_LMR_CONTEXT lc_a, lc_b;
	DAT_RMR_CONTEXT rc_a, rc_b;
	DAT_EVENT ev;
	enum {
		BUF = 64 * 1024,
		SEND = 0,
		SRC = 4096,
		DST = 16384,
		TARGET = 32768,
		IMM = 49152,
		WINDOW = 53248,
	};
	static unsigned char buf_a[BUF] __attribute__((aligned(4096)));
	static unsigned char buf_b[BUF] __attribute__((aligned(4096)));
	for (int i = 0; i < BUF; i++)
		buf_a[i] = (unsigned char)(i * 7 + 3);

	REQUIRE("setup.conn_pz_create", dat_pz_create(ia, &pz));
	REQUIRE("setup.evd_create_cr", evd(ia, 4, DAT_EVD_CR_FLAG, &cr_evd));
	REQUIRE("setup.evd_create_conn_a", evd(ia, 4, DAT_EVD_CONNECTION_FLAG, &conn_a));
	REQUIRE("setup.evd_create_conn_b", evd(ia, 4, DAT_EVD_CONNECTION_FLAG, &conn_b));
	REQUIRE("setup.evd_create_dto_a", evd(ia, 16, DAT_EVD_DTO_FLAG, &dto_a));
	REQUIRE("setup.evd_create_dto_b", evd(ia, 16, DAT_EVD_DTO_FLAG, &dto_b));
	REQUIRE("setup.ep_create_a", dat_ep_create(ia, pz, dto_a, dto_a, conn_a, NULL, &ep_a));
	REQUIRE("setup.ep_create_b", dat_ep_create(ia, pz, dto_b, dto_b, conn_b, NULL, &ep_b));
	REQUIRE("setup.lmr_create_a", lmr(ia, pz, buf_a, BUF, &lmr_a, &lc_a, &rc_a));
	REQUIRE("setup.lmr_create_b", lmr(ia, pz, buf_b, BUF, &lmr_b, &lc_b, &rc_b));

	/* Passive side: PSP on a pid-derived conn_qual, two receives posted before connecting */
	DAT_CONN_QUAL qual = 40000 + getpid() % 1000;
	DAT_RETURN r;
	for (int i = 0; i < 20; i++, qual = 40000 + (qual - 40000 + 37) % 1001) {
		r = dat_psp_create(ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp);
		if (DAT_GET_TYPE(r) != DAT_CONN_QUAL_IN_USE)
			break;
	}
	REQUIRE("setup.psp_create", r);
	DAT_LMR_TRIPLET recv1 = {(uintptr_t)buf_b, 256, lc_b};
	DAT_LMR_TRIPLET recv2 = {(uintptr_t)buf_b + 256, 256, lc_b};
	REQUIRE("setup.post_recv_1_before_connect",
		dat_ep_post_recv(ep_b, 1, &recv1, cookie(0xb1), DAT_COMPLETION_DEFAULT_FLAG));
	REQUIRE("setup.post_recv_2_before_connect",
		dat_ep_post_recv(ep_b, 1, &recv2, cookie(0xb2), DAT_COMPLETION_DEFAULT_FLAG));

	/* Connect to ourselves over 127.0.0.1 with 48 bytes of private data */
	unsigned char pdata[48], apdata[48];
	for (int i = 0; i < 48; i++) {
		pdata[i] = (unsigned char)(i + 1);
		apdata[i] = (unsigned char)(0xa0 + i);
	}
	struct sockaddr_in to;
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(0x7f000001);
	REQUIRE("conn.ep_connect", dat_ep_connect(ep_a, (DAT_IA_ADDRESS_PTR)&to, qual, WAIT_US, 48,
						  pdata, DAT_QOS_BEST_EFFORT,
						  DAT_CONNECT_DEFAULT_FLAG));
	REQUIRE("conn.cr_arrival_event", wait_event(cr_evd, WAIT_US, &ev));
	const DAT_CR_ARRIVAL_EVENT_DATA *cra = &ev.event_data.cr_arrival_event_data;
	CHECK("conn.cr_arrival_event_number", ev.event_number, DAT_CONNECTION_REQUEST_EVENT);
	CHECK("conn.cr_arrival_psp_handle", cra->sp_handle.psp_handle, psp);
	CHECK("conn.cr_arrival_conn_qual", cra->conn_qual, qual);
	DAT_CR_HANDLE cr = cra->cr_handle;
	DAT_CR_PARAM crp;
	memset(&crp, 0, sizeof(crp));
	REQUIRE("conn.cr_query", dat_cr_query(cr, DAT_CR_FIELD_ALL, &crp));
	CHECK("conn.cr_query_private_data_size", crp.private_data_size, 48);
	CHECK_TRUE("conn.cr_query_private_data_matches",
		   crp.private_data && !memcmp(crp.private_data, pdata, 48));
	struct sockaddr_in *from = (struct sockaddr_in *)crp.remote_ia_address_ptr;
	CHECK_TRUE("conn.cr_query_remote_address_127_0_0_1",
		   from && from->sin_family == AF_INET &&
			   ntohl(from->sin_addr.s_addr) == 0x7f000001);
	REQUIRE("conn.cr_accept", dat_cr_accept(cr, ep_b, 48, apdata));
	REQUIRE("conn.established_event_passive", wait_event(conn_b, WAIT_US, &ev));
	CHECK("conn.established_passive_event_number", ev.event_number,
	      DAT_CONNECTION_EVENT_ESTABLISHED);
	CHECK("conn.established_passive_ep_handle", ev.event_data.connect_event_data.ep_handle,
	      ep_b);
	REQUIRE("conn.established_event_active", wait_event(conn_a, WAIT_US, &ev));
	const DAT_CONNECTION_EVENT_DATA *ce = &ev.event_data.connect_event_data;
	CHECK("conn.established_active_event_number", ev.event_number,
	      DAT_CONNECTION_EVENT_ESTABLISHED);
	CHECK("conn.established_active_ep_handle", ce->ep_handle, ep_a);
	CHECK("conn.established_active_private_data_size", ce->private_data_size, 48);
	CHECK_TRUE("conn.established_active_private_data_is_the_accept_pdata",
		   ce->private_data && !memcmp(ce->private_data, apdata, 48));

	/* send -> recv */
	memcpy(buf_a + SEND, "hello over the dat c abi, 32 by", 32);
	DAT_LMR_TRIPLET snd = {(uintptr_t)buf_a + SEND, 32, lc_a};
	CHECK("dto.post_send", dat_ep_post_send(ep_a, 1, &snd, cookie(0xa1),
						DAT_COMPLETION_DEFAULT_FLAG), DAT_SUCCESS);
	check_dto("dto.send_completion", dto_a, DAT_DTO_COMPLETION_EVENT, ep_a, 0xa1, 32, &ev);
	if (check_dto("dto.recv_completion", dto_b, DAT_DTO_COMPLETION_EVENT, ep_b, 0xb1, 32, &ev))
		CHECK_TRUE("dto.recv_data_matches", !memcmp(buf_b, buf_a + SEND, 32));

	/* RDMA write of 4 KiB into b, then RDMA read of it back into a */
	DAT_LMR_TRIPLET src = {(uintptr_t)buf_a + SRC, 4096, lc_a};
	DAT_LMR_TRIPLET dst = {(uintptr_t)buf_a + DST, 4096, lc_a};
	DAT_RMR_TRIPLET target = {(uintptr_t)buf_b + TARGET, 4096, rc_b};
	CHECK("dto.post_rdma_write", dat_ep_post_rdma_write(ep_a, 1, &src, cookie(0xa2), &target,
							    DAT_COMPLETION_DEFAULT_FLAG),
	      DAT_SUCCESS);
	check_dto("dto.rdma_write_completion", dto_a, DAT_DTO_COMPLETION_EVENT, ep_a, 0xa2, 4096,
		  &ev);
	CHECK("dto.post_rdma_read", dat_ep_post_rdma_read(ep_a, 1, &dst, cookie(0xa3), &target,
							  DAT_COMPLETION_DEFAULT_FLAG),
	      DAT_SUCCESS);
	check_dto("dto.rdma_read_completion", dto_a, DAT_DTO_COMPLETION_EVENT, ep_a, 0xa3, 4096,
		  &ev);
	CHECK_TRUE("dto.rdma_write_placed_at_target", !memcmp(buf_b + TARGET, buf_a + SRC, 4096));
	CHECK_TRUE("dto.rdma_read_data_matches", !memcmp(buf_a + DST, buf_a + SRC, 4096));
	CHECK("dto.rdma_write_and_read_leave_target_evd_empty", dat_evd_dequeue(dto_b, &ev),
	      DAT_QUEUE_EMPTY);

	/* ep_query: the IA as libdat2's index, both addresses */
	DAT_EP_PARAM epp;
	memset(&epp, 0, sizeof(epp));
	if (CHECK("ep_query.succeeds", dat_ep_query(ep_a, DAT_EP_FIELD_ALL, &epp), DAT_SUCCESS)) {
		/* a raw provider pointer here would crash dat_ia_query inside libdat2 */
		if (CHECK("ep_query.ia_handle_is_the_consumer_index", epp.ia_handle, ia))
			CHECK("ep_query.ia_handle_accepted_by_ia_query",
			      dat_ia_query(epp.ia_handle, NULL, 0, NULL, 0, NULL), DAT_SUCCESS);
		CHECK_TRUE("ep_query.local_address_non_null", epp.local_ia_address_ptr != NULL);
		struct sockaddr_in *ra = (struct sockaddr_in *)epp.remote_ia_address_ptr;
		if (CHECK_TRUE("ep_query.remote_address_non_null", ra != NULL))
			CHECK("ep_query.remote_address_127_0_0_1", ntohl(ra->sin_addr.s_addr),
			      0x7f000001);
		CHECK("ep_query.ep_state_connected", epp.ep_state, DAT_EP_STATE_CONNECTED);
		CHECK("ep_query.pz_handle", epp.pz_handle, pz);
		CHECK("ep_query.connect_evd_handle", epp.connect_evd_handle, conn_a);
	}

	/* RDMA write with immediate data: the IB extension's completions on both sides */
	DAT_LMR_TRIPLET isrc = {(uintptr_t)buf_a + SRC, 64, lc_a};
	DAT_RMR_TRIPLET itarget = {(uintptr_t)buf_b + IMM, 64, rc_b};
	CHECK("immed.post_rdma_write_immed",
	      dat_ib_post_rdma_write_immed(ep_a, 1, &isrc, cookie(0xa4), &itarget, 0x7777,
					   DAT_COMPLETION_DEFAULT_FLAG),
	      DAT_SUCCESS);
	DAT_IB_EXTENSION_EVENT_DATA *x = (DAT_IB_EXTENSION_EVENT_DATA *)ev.event_extension_data;
	if (check_dto("immed.own_completion", dto_a, DAT_IB_DTO_EVENT, ep_a, 0xa4, 64, &ev))
		CHECK("immed.own_completion_ext_type", x->type, DAT_IB_RDMA_WRITE_IMMED);
	if (check_dto("immed.peer_completion", dto_b, DAT_IB_DTO_EVENT, ep_b, 0xb2, 64, &ev)) {
		CHECK("immed.peer_completion_ext_type", x->type, DAT_IB_RDMA_WRITE_IMMED_DATA);
		CHECK("immed.peer_completion_immediate", x->val.immed.data, 0x7777);
		CHECK_TRUE("immed.data_placed", !memcmp(buf_b + IMM, buf_a + SRC, 64));
	}

	/* Send with Invalidate, through the provider's vtable as DAT_EP_POST_SEND_WITH_INVALIDATE
	 * calls it (libdat2 exports no dat_ep_post_send_with_invalidate) */
	DAT_RMR_HANDLE rmr;
	DAT_RMR_CONTEXT inv_ctx = 0;
	DAT_LMR_TRIPLET window = {(uintptr_t)buf_b + WINDOW, 256, lc_b};
	DAT_LMR_TRIPLET recv3 = {(uintptr_t)buf_b + 512, 256, lc_b};
	DAT_LMR_TRIPLET recv4 = {(uintptr_t)buf_b + 768, 256, lc_b};
	REQUIRE("setup.rmr_create", dat_rmr_create(pz, &rmr));
	REQUIRE("setup.rmr_bind", dat_rmr_bind(rmr, lmr_b, &window, DAT_MEM_PRIV_REMOTE_WRITE_FLAG,
					       DAT_VA_TYPE_VA, ep_b, cookie(0xc1),
					       DAT_COMPLETION_SUPPRESS_FLAG, &inv_ctx));
	REQUIRE("setup.post_recv_3", dat_ep_post_recv(ep_b, 1, &recv3, cookie(0xb3),
						      DAT_COMPLETION_DEFAULT_FLAG));
	REQUIRE("setup.post_recv_4", dat_ep_post_recv(ep_b, 1, &recv4, cookie(0xb4),
						      DAT_COMPLETION_DEFAULT_FLAG));
	const DAT_DTO_COMPLETION_EVENT_DATA *dd = &ev.event_data.dto_completion_event_data;
	DAT_LMR_TRIPLET isnd = {(uintptr_t)buf_a + SEND, 16, lc_a};
	CHECK("invalidate.post_with_invalidate_flag_true",
	      DAT_EP_POST_SEND_WITH_INVALIDATE(ep_a, 1, &isnd, cookie(0xa5),
					       DAT_COMPLETION_DEFAULT_FLAG, DAT_TRUE, inv_ctx),
	      DAT_SUCCESS);
	if (check_dto("invalidate.own_completion", dto_a, DAT_DTO_COMPLETION_EVENT, ep_a, 0xa5, 16,
		      &ev))
		CHECK("invalidate.own_completion_is_a_send", dd->operation, DAT_DTO_SEND);
	if (check_dto("invalidate.peer_completion", dto_b, DAT_DTO_COMPLETION_EVENT, ep_b, 0xb3, 16,
		      &ev)) {
		CHECK("invalidate.peer_completion_operation", dd->operation,
		      DAT_DTO_RECEIVE_WITH_INVALIDATE);
		CHECK("invalidate.peer_completion_rmr_context", dd->rmr_context, inv_ctx);
		CHECK_TRUE("invalidate.data_matches", !memcmp(buf_b + 512, buf_a + SEND, 16));
	}
	DAT_RMR_PARAM rp;
	memset(&rp, 0xff, sizeof(rp));
	if (CHECK("invalidate.rmr_query", dat_rmr_query(rmr, DAT_RMR_FIELD_ALL, &rp), DAT_SUCCESS))
		CHECK("invalidate.rmr_query_context_is_0_once_invalidated", rp.rmr_context, 0);
	/* invalidate_flag FALSE: a plain send, the context ignored */
	CHECK("invalidate.post_with_invalidate_flag_false",
	      DAT_EP_POST_SEND_WITH_INVALIDATE(ep_a, 1, &isnd, cookie(0xa6),
					       DAT_COMPLETION_DEFAULT_FLAG, DAT_FALSE, 0x1234),
	      DAT_SUCCESS);
	check_dto("invalidate.flag_false_own_completion", dto_a, DAT_DTO_COMPLETION_EVENT, ep_a,
		  0xa6, 16, &ev);
	if (check_dto("invalidate.flag_false_peer_completion", dto_b, DAT_DTO_COMPLETION_EVENT, ep_b,
		      0xb4, 16, &ev))
		CHECK("invalidate.flag_false_peer_completion_is_a_receive", dd->operation,
		      DAT_DTO_RECEIVE);
	/* neither TRUE nor FALSE: refused, nothing posted */
	CHECK_TYPE("invalidate.other_invalidate_flag_is_invalid_parameter",
		   DAT_EP_POST_SEND_WITH_INVALIDATE(ep_a, 1, &isnd, cookie(0xa7),
						    DAT_COMPLETION_DEFAULT_FLAG, 2, inv_ctx),
		   DAT_INVALID_PARAMETER);
	CHECK("invalidate.refused_post_leaves_request_evd_empty", dat_evd_dequeue(dto_a, &ev),
	      DAT_QUEUE_EMPTY);
	CHECK("invalidate.rmr_free", dat_rmr_free(rmr), DAT_SUCCESS);

	/* disconnect: one DISCONNECTED per EP, none more after the passive side disconnects too */
	CHECK("disconnect.active_graceful", dat_ep_disconnect(ep_a, DAT_CLOSE_GRACEFUL_FLAG),
	      DAT_SUCCESS);
	DAT_EVD_HANDLE conns[2] = {conn_a, conn_b};
	DAT_EP_HANDLE eps[2] = {ep_a, ep_b};
	const char *side[2] = {"active", "passive"};
	char name[128];
	for (int i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "disconnect.%s_disconnected_event", side[i]);
		if (CHECK(name, wait_event(conns[i], WAIT_US, &ev), DAT_SUCCESS)) {
			snprintf(name, sizeof(name), "disconnect.%s_event_number", side[i]);
			CHECK(name, ev.event_number, DAT_CONNECTION_EVENT_DISCONNECTED);
			snprintf(name, sizeof(name), "disconnect.%s_event_ep_handle", side[i]);
			CHECK(name, ev.event_data.connect_event_data.ep_handle, eps[i]);
		}
	}
	CHECK("disconnect.passive_after_disconnected_is_no_op",
	      dat_ep_disconnect(ep_b, DAT_CLOSE_ABRUPT_FLAG), DAT_SUCCESS);
	for (int i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "disconnect.%s_no_second_event", side[i]);
		CHECK_TYPE(name, wait_event(conns[i], QUIET_US, &ev), DAT_TIMEOUT_EXPIRED);
	}
	DAT_EP_STATE st = 0;
	dat_ep_get_status(ep_a, &st, NULL, NULL);
	CHECK("disconnect.active_state_disconnected", st, DAT_EP_STATE_DISCONNECTED);

	/* free the EPs and the PSP; the PZ, EVDs and LMRs stay for ia_close(ABRUPT) */
	CHECK("close.psp_free", dat_psp_free(psp), DAT_SUCCESS);
	CHECK("close.ep_free_active", dat_ep_free(ep_a), DAT_SUCCESS);
	CHECK("close.ep_free_passive", dat_ep_free(ep_b), DAT_SUCCESS);
}

int main(int argc, char **argv)
{
	char *name = argc > 1 ? argv[1] : "daplrs-lo";
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
	DAT_PZ_HANDLE pz;

	setvbuf(stdout, NULL, _IOLBF, 0);
	REQUIRE("load.ia_open_by_dat_conf_name", dat_ia_open(name, 8, &async_evd, &ia));
	CHECK_TRUE("load.async_evd_returned", async_evd != DAT_HANDLE_NULL);
	ia_query_checks(ia, async_evd);
	object_checks(ia);
	connection_checks(ia);
	/* PZ, 5 EVDs and 2 LMRs of connection_checks are still alive */
	CHECK("close.ia_close_abrupt_with_live_objects", dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG),
	      DAT_SUCCESS);

	/* a second open (the library is initialised again after the last close) */
	REQUIRE("close.ia_reopen", dat_ia_open(name, 8, &async_evd, &ia));
	REQUIRE("close.pz_create_after_reopen", dat_pz_create(ia, &pz));
	CHECK_TYPE("close.ia_close_graceful_with_live_pz_is_invalid_state",
		   dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG), DAT_INVALID_STATE);
	CHECK("close.pz_free_after_refused_close", dat_pz_free(pz), DAT_SUCCESS);
	CHECK("close.ia_close_graceful_when_empty", dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG),
	      DAT_SUCCESS);
	return finish();
}
