/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* destroy_held: rdma_destroy_id on an id whose event the calling thread
 * itself holds unacked (the wait that never ends by itself: spdk's
 * deadlock).  The main thread resolves DST, gets ADDR_RESOLVED, keeps it
 * unacked and destroys the id; a second thread acks the event, as soon as
 * LOGFILE (when given) contains the library's message about the wait, or
 * after 3 s.  Prints when the message was seen (relative to the destroy
 * call), when the ack came, and when the destroy returned; exits 0 when the
 * destroy returned 0 and only after the ack (the wait is upstream's: it
 * ends with the ack and not before).
 *
 *   destroy_held DST [LOGFILE]
 */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define ACK_AFTER_MS 3000

static struct rdma_cm_event *held;
static const char *logfile;
static long t0, seen_at = -1, ack_at = -1;

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static int file_has(const char *path, const char *what)
{
	char buf[8192];
	FILE *f = fopen(path, "r");
	size_t n;
	int found = 0;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	found = strstr(buf, what) != NULL;
	fclose(f);
	return found;
}

static void *acker(void *arg)
{
	(void)arg;
	for (;;) {
		long t = now_ms() - t0;
		if (logfile && file_has(logfile, "unacked event")) {
			seen_at = t;
			break;
		}
		if (t >= ACK_AFTER_MS)
			break;
		usleep(20000);
	}
	ack_at = now_ms() - t0;
	if (rdma_ack_cm_event(held))
		perror("rdma_ack_cm_event");
	return NULL;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST }, *ai;
	pthread_t th;
	long done;
	int ret;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s DST [LOGFILE]\n", argv[0]);
		return 2;
	}
	logfile = argc == 3 ? argv[2] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getaddrinfo(argv[1], "7471", &hints, &ai)) {
		fprintf(stderr, "bad address %s\n", argv[1]);
		return 2;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("channel/id");
		return 1;
	}
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000) || rdma_get_cm_event(ch, &held)) {
		perror("resolve_addr/get_cm_event");
		return 1;
	}
	printf("got %s status %d, not acked\n", rdma_event_str(held->event), held->status);
	if (held->event != RDMA_CM_EVENT_ADDR_RESOLVED || held->id != id)
		return 1;
	t0 = now_ms();
	if (pthread_create(&th, NULL, acker, NULL))
		return 1;
	ret = rdma_destroy_id(id);
	done = now_ms() - t0;
	pthread_join(th, NULL);
	if (seen_at >= 0)
		printf("message about the wait seen at +%ld ms\n", seen_at);
	else
		printf("no message about the wait\n");
	printf("event acked by the other thread at +%ld ms\n", ack_at);
	printf("rdma_destroy_id returned %d at +%ld ms, %s the ack\n", ret, done, done >= ack_at ? "after" : "BEFORE");
	rdma_destroy_event_channel(ch);
	freeaddrinfo(ai);
	return ret == 0 && done >= ack_at ? 0 : 1;
}
