/*
 * Memory of a long-running DAT server: N connect/accept/disconnect/free cycles through the C
 * ABI (libdat2, then libdaplrs.so), printing the resident set every REPORT cycles. Each cycle
 * makes and frees two endpoints and a connection request. Run by bench/handles.sh.
 *
 * Usage: handle_cycles <ia_name> <cycles> <report_every>
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dat2/udat.h>

#define WAIT_US (10 * 1000 * 1000)

static long rss_kib(void)
{
	long size = 0, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = -1;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void must(const char *what, DAT_RETURN r)
{
	if (r != DAT_SUCCESS) {
		fprintf(stderr, "handle_cycles: %s: 0x%x\n", what, r);
		exit(1);
	}
}

static DAT_EVENT wait1(DAT_EVD_HANDLE evd, DAT_EVENT_NUMBER want, const char *what)
{
	DAT_EVENT ev;
	DAT_COUNT more;
	must(what, dat_evd_wait(evd, WAIT_US, 1, &ev, &more));
	if (ev.event_number != want) {
		fprintf(stderr, "handle_cycles: %s: event 0x%x, want 0x%x\n", what, ev.event_number,
			want);
		exit(1);
	}
	return ev;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: handle_cycles <ia_name> <cycles> <report_every>\n");
		return 2;
	}
	long cycles = atol(argv[2]), every = atol(argv[3]);
	DAT_IA_HANDLE ia;
	DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, cr_evd, conn, dto;
	DAT_PZ_HANDLE pz;
	DAT_PSP_HANDLE psp;
	must("ia_open", dat_ia_open(argv[1], 8, &async_evd, &ia));
	must("pz_create", dat_pz_create(ia, &pz));
	must("evd cr", dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
	must("evd conn", dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
	must("evd dto", dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
	DAT_CONN_QUAL qual = 41000 + getpid() % 1000;
	must("psp_create", dat_psp_create(ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
	struct sockaddr_in to;
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(0x7f000001);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	printf("cycles %ld rss_kib %ld\n", 0L, rss_kib());
	for (long i = 1; i <= cycles; i++) {
		DAT_EP_HANDLE a, b;
		must("ep_create a", dat_ep_create(ia, pz, dto, dto, conn, NULL, &a));
		must("ep_create b", dat_ep_create(ia, pz, dto, dto, conn, NULL, &b));
		must("ep_connect", dat_ep_connect(a, (DAT_IA_ADDRESS_PTR)&to, qual, WAIT_US, 0, NULL,
						  DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
		DAT_EVENT ev = wait1(cr_evd, DAT_CONNECTION_REQUEST_EVENT, "cr arrival");
		must("cr_accept", dat_cr_accept(ev.event_data.cr_arrival_event_data.cr_handle, b, 0,
						NULL));
		wait1(conn, DAT_CONNECTION_EVENT_ESTABLISHED, "established 1");
		wait1(conn, DAT_CONNECTION_EVENT_ESTABLISHED, "established 2");
		must("ep_disconnect", dat_ep_disconnect(a, DAT_CLOSE_ABRUPT_FLAG));
		wait1(conn, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected 1");
		wait1(conn, DAT_CONNECTION_EVENT_DISCONNECTED, "disconnected 2");
		must("ep_free a", dat_ep_free(a));
		must("ep_free b", dat_ep_free(b));
		if (i % every == 0)
			printf("cycles %ld rss_kib %ld\n", i, rss_kib());
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("seconds %.1f\n", (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	must("psp_free", dat_psp_free(psp));
	must("ia_close", dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
	return 0;
}
