/* SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB */
/* destroy_queued: rdma_destroy_id (or rdma_migrate_id) of an id whose
 * event is queued on its channel while another thread is on its way to
 * read it: the reader's poll has reported the channel readable, and the
 * reader was descheduled before its rdma_get_cm_event (rping's client ends
 * in this window now and then: its event thread then waits forever).
 *
 * The channel is non-blocking, so the reader never hangs here: it learns
 * EAGAIN where the event went with the destroy.  Steps:
 *   - a reader thread takes and acks one event of the channel (id A's
 *     ADDR_RESOLVED), as an event thread does;
 *   - main resolves id B; the reader's poll reports the channel readable,
 *     then it waits for main to start the destroy (or migrate) of B, pauses
 *     10 ms and calls rdma_get_cm_event;
 *   - main destroys B (MODE destroy) or moves it to a second channel (MODE
 *     migrate).
 * Prints what the reader got ("reader got ADDR_RESOLVED of B" or "reader
 * got EAGAIN") and what the destroy or migrate returned; exits 0 when both
 * calls succeeded (the outcome is for the caller to judge).
 *
 *   destroy_queued DST destroy|migrate
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;
static struct rdma_cm_id *a, *b;
static atomic_int phase, saw, started, failed;
static char outcome[128];

static void pause_ms(int ms)
{
	struct timespec t = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* Waits until *flag is set, at most 5 s; returns whether it was. */
static int wait_flag(atomic_int *flag)
{
	for (int i = 0; i < 5000; i++) {
		if (atomic_load(flag))
			return 1;
		pause_ms(1);
	}
	return 0;
}

static void *reader(void *arg)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	(void)arg;
	/* One event as any event thread takes it: the channel's reader. */
	if (poll(&p, 1, 5000) != 1 || rdma_get_cm_event(ch, &ev)) {
		snprintf(outcome, sizeof(outcome), "reader: first event missing (%s)", strerror(errno));
		atomic_store(&failed, 1);
		atomic_store(&phase, 1);
		return NULL;
	}
	printf("reader got %s of %s\n", rdma_event_str(ev->event), ev->id == a ? "A" : "?");
	rdma_ack_cm_event(ev);
	atomic_store(&phase, 1);
	/* B's event: readable, then descheduled until the destroy started. */
	if (poll(&p, 1, 5000) != 1) {
		snprintf(outcome, sizeof(outcome), "reader: B's event never came");
		atomic_store(&failed, 1);
		atomic_store(&saw, 1);
		return NULL;
	}
	atomic_store(&saw, 1);
	if (!wait_flag(&started)) {
		snprintf(outcome, sizeof(outcome), "reader: main never started");
		return NULL;
	}
	pause_ms(10);
	if (rdma_get_cm_event(ch, &ev)) {
		snprintf(outcome, sizeof(outcome), "reader got %s", errno == EAGAIN ? "EAGAIN" : strerror(errno));
		return NULL;
	}
	snprintf(outcome, sizeof(outcome), "reader got %s of %s", rdma_event_str(ev->event),
		 ev->id == b ? "B" : ev->id == a ? "A" : "?");
	rdma_ack_cm_event(ev);
	return NULL;
}

/* A run that stopped before the destroy: what the reader says (it returns
 * within its own 5 s waits), and failure. */
static int give_up(pthread_t th)
{
	pthread_join(th, NULL);
	printf("%s\n", outcome[0] ? outcome : "reader: no outcome");
	return 1;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST }, *ai;
	struct rdma_event_channel *other = NULL;
	int migrate, ret, err;
	pthread_t th;

	if (argc != 3 || (strcmp(argv[2], "destroy") && strcmp(argv[2], "migrate"))) {
		fprintf(stderr, "usage: %s DST destroy|migrate\n", argv[0]);
		return 2;
	}
	migrate = !strcmp(argv[2], "migrate");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getaddrinfo(argv[1], "7471", &hints, &ai)) {
		fprintf(stderr, "bad address %s\n", argv[1]);
		return 2;
	}
	ch = rdma_create_event_channel();
	if (!ch || fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) ||
	    rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) || rdma_create_id(ch, &b, NULL, RDMA_PS_TCP)) {
		perror("channel/ids");
		return 1;
	}
	if (migrate && !(other = rdma_create_event_channel())) {
		perror("second channel");
		return 1;
	}
	if (pthread_create(&th, NULL, reader, NULL))
		return 1;
	if (rdma_resolve_addr(a, NULL, ai->ai_addr, 2000)) {
		perror("rdma_resolve_addr A");
		return 1;
	}
	if (!wait_flag(&phase) || atomic_load(&failed))
		return give_up(th);
	if (rdma_resolve_addr(b, NULL, ai->ai_addr, 2000)) {
		perror("rdma_resolve_addr B");
		return 1;
	}
	if (!wait_flag(&saw) || atomic_load(&failed))
		return give_up(th);
	atomic_store(&started, 1);
	ret = migrate ? rdma_migrate_id(b, other) : rdma_destroy_id(b);
	err = errno;
	pthread_join(th, NULL);
	printf("%s\n", outcome);
	printf("rdma_%s_id returned %d%s%s\n", argv[2], ret, ret ? " " : "", ret ? strerror(err) : "");
	if (migrate)
		rdma_destroy_id(b);
	rdma_destroy_id(a);
	rdma_destroy_event_channel(ch);
	if (other)
		rdma_destroy_event_channel(other);
	freeaddrinfo(ai);
	return ret == 0 ? 0 : 1;
}
