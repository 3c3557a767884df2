/* queue.c — the model-owner worker: one thread runs generations FIFO from a bounded queue. */
#include <stdio.h>
#include <string.h>

#include "../base/clock.h"
#include "internal.h"

static void *worker_main(void *arg) {
    srv_queue *q = arg;
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
        q->running = 1;
        q->current = j;
        int stopping = q->stopping;
        pthread_mutex_unlock(&q->mu);

        if (stopping) job_cancel(j);
        double t0 = clock_now();
        pipeline_run(j, q->be);
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
        q->running = 0;
        q->current = NULL;
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
    q->max = max;
    q->quiet = quiet;
    if (pthread_create(&q->thread, NULL, worker_main, q) != 0)
        return err_set(err, MTPLX_EINTERNAL, "cannot start the worker thread");
    q->thread_started = 1;
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

/* Cancel everything (queued jobs are finished without running), then join the worker. */
void queue_stop(srv_queue *q) {
    if (!q->thread_started) return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    for (srv_job *j = q->head; j; j = j->next) job_cancel(j);
    if (q->current) job_cancel(q->current);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->thread, NULL);
    q->thread_started = 0;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}
