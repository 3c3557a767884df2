/* queue.c — the workers: one thread per generation slot of the backend takes jobs FIFO from a
 * bounded queue and runs them (the backend merges the running generations' forwards). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "internal.h"

static void *worker_main(void *arg) {
    srv_worker *w = arg;
    srv_queue *q = w->q;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head) {
            pthread_mutex_unlock(&q->mu);
            break;
        }
        srv_job *j = q->head;
        q->head = j->next;
        if (!q->head) q->tail = NULL;
        q->waiting--;
        q->running++;
        w->current = j;
        int stopping = q->stopping;
        pthread_mutex_unlock(&q->mu);

        if (stopping) job_cancel(j);
        double t0 = clock_now();
        pipeline_run(j, q->be, w->slot);
        pthread_mutex_lock(&j->mu);
        int cancelled = j->cancelled_before_done; /* a hang-up after the complete answer is no cancel */
        pthread_mutex_unlock(&j->mu);
        if (j->started && j->finish && !j->failed)
            metrics_generation(q->metrics, &j->stats, cancelled, j->stop_hit != 0, j->n_calls);
        if (!q->quiet)
            fprintf(stderr, "mtplx serve: %s prompt=%d completion=%d finish=%s%s %.2fs\n", j->id, j->n_prompt,
                    j->stats.completion_tokens, j->finish ? j->finish : "-", cancelled ? " (cancelled)" : "",
                    clock_now() - t0);

        pthread_mutex_lock(&q->mu);
        q->running--;
        w->current = NULL;
        pthread_mutex_unlock(&q->mu);
        job_unref(j);
    }
    return NULL;
}

int queue_start(srv_queue *q, srv_backend *be, srv_metrics *m, int max, int quiet, mtplx_err *err) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->be = be;
    q->metrics = m;
    m->be = be;
    q->max = max;
    q->quiet = quiet;
    q->n_workers = be->n_slots > 0 ? be->n_slots : 1;
    q->workers = calloc((size_t)q->n_workers, sizeof *q->workers);
    if (!q->workers) return err_set(err, MTPLX_ENOMEM, "out of memory for %d workers", q->n_workers);
    for (int i = 0; i < q->n_workers; i++) {
        srv_worker *w = &q->workers[i];
        w->q = q;
        w->slot = i;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            queue_stop(q);
            return err_set(err, MTPLX_EINTERNAL, "cannot start worker thread %d", i);
        }
        w->started = 1;
    }
    return 0;
}

int queue_push(srv_queue *q, srv_job *j) {
    pthread_mutex_lock(&q->mu);
    if (q->stopping || q->waiting >= q->max) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (q->tail) q->tail->next = j;
    else q->head = j;
    q->tail = j;
    q->waiting++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

void queue_counts(srv_queue *q, int *waiting, int *running) {
    pthread_mutex_lock(&q->mu);
    *waiting = q->waiting;
    *running = q->running;
    pthread_mutex_unlock(&q->mu);
}

/* Cancel everything (queued jobs are finished without running), then join the workers. */
void queue_stop(srv_queue *q) {
    if (!q->workers) return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    for (srv_job *j = q->head; j; j = j->next) job_cancel(j);
    for (int i = 0; i < q->n_workers; i++)
        if (q->workers[i].current) job_cancel(q->workers[i].current);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->n_workers; i++)
        if (q->workers[i].started) pthread_join(q->workers[i].thread, NULL);
    free(q->workers);
    q->workers = NULL;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}
