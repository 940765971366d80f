"""Syncer: a native thread that runs fdatasync for a log without ever taking the GIL.

A Python flusher thread takes the GIL after every fdatasync to report, and the event loop
then takes it back: at one write in flight that costs a handful of futex calls and context
switches per write on every node, and a report can wait behind the loop's Python code. Here
the loop hands over a file descriptor, the thread syncs it and closes it, records the
result, and writes to an eventfd that the loop watches. The loop does all bookkeeping;
this thread runs C only.

One job at a time (a log's flush cycles are serial). ``submit`` owns the descriptor it is
given (pass a dup). ``collect`` returns the finished job's ``(errno, seconds)`` or None;
``wait`` blocks (GIL released) until the job is done, for closing.
"""

from libc.stdint cimport uint64_t, int64_t

cdef extern from *:
    """
    #include <errno.h>
    #include <pthread.h>
    #include <stdint.h>
    #include <string.h>
    #include <sys/eventfd.h>
    #include <time.h>
    #include <unistd.h>

    typedef struct {
        pthread_mutex_t mu;
        pthread_cond_t work;   /* the thread waits here for a job */
        pthread_cond_t done;   /* wait() waits here for the result */
        pthread_t thread;
        int efd;
        int job_fd;            /* -1: no job queued */
        int busy;              /* a job was submitted and not yet collected */
        int finished;          /* the job is done; result below */
        int result_errno;
        int64_t result_ns;
        int stopping;
        int started;
    } kraft_syncer;

    static int64_t kraft_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }

    static void *kraft_syncer_run(void *arg) {
        kraft_syncer *s = (kraft_syncer *)arg;
        for (;;) {
            pthread_mutex_lock(&s->mu);
            while (s->job_fd < 0 && !s->stopping)
                pthread_cond_wait(&s->work, &s->mu);
            if (s->job_fd < 0) { pthread_mutex_unlock(&s->mu); return NULL; }
            int fd = s->job_fd;
            pthread_mutex_unlock(&s->mu);

            int64_t began = kraft_now_ns();
            int rc = fdatasync(fd);
            int err = rc == 0 ? 0 : errno;
            int64_t took = kraft_now_ns() - began;
            close(fd);

            pthread_mutex_lock(&s->mu);
            s->job_fd = -1;
            s->finished = 1;
            s->result_errno = err;
            s->result_ns = took;
            pthread_cond_broadcast(&s->done);
            pthread_mutex_unlock(&s->mu);
            uint64_t one = 1;
            ssize_t w = write(s->efd, &one, sizeof one);
            (void)w;  /* EAGAIN only if the counter is full: the loop is woken anyway */
        }
    }

    static int kraft_syncer_start(kraft_syncer *s) {
        memset(s, 0, sizeof *s);
        s->job_fd = -1;
        s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (s->efd < 0) return errno;
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->work, NULL);
        pthread_cond_init(&s->done, NULL);
        int rc = pthread_create(&s->thread, NULL, kraft_syncer_run, s);
        if (rc) { close(s->efd); s->efd = -1; return rc; }
        s->started = 1;
        return 0;
    }

    /* 0, or EBUSY if a job is still uncollected. */
    static int kraft_syncer_submit(kraft_syncer *s, int fd) {
        pthread_mutex_lock(&s->mu);
        if (s->busy || s->stopping) { pthread_mutex_unlock(&s->mu); return EBUSY; }
        s->busy = 1;
        s->finished = 0;
        s->job_fd = fd;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }

    /* 1 with the result if the job finished (and forget it), else 0. The eventfd is
       drained first, every time: the thread writes it after publishing the result, so a
       write that lands after a blocking collect is drained by the next call instead of
       leaving the loop woken forever. */
    static int kraft_syncer_collect(kraft_syncer *s, int block, int *err, int64_t *ns) {
        uint64_t count;
        ssize_t r = read(s->efd, &count, sizeof count);
        (void)r;
        pthread_mutex_lock(&s->mu);
        if (block)
            while (s->busy && !s->finished)
                pthread_cond_wait(&s->done, &s->mu);
        int got = s->busy && s->finished;
        if (got) {
            *err = s->result_errno;
            *ns = s->result_ns;
            s->busy = 0;
            s->finished = 0;
        }
        pthread_mutex_unlock(&s->mu);
        return got;
    }

    static void kraft_syncer_stop(kraft_syncer *s) {
        if (!s->started) return;
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        if (s->job_fd >= 0) { close(s->job_fd); s->job_fd = -1; }
        close(s->efd);
        s->efd = -1;
        s->started = 0;
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->done);
    }
    """
    ctypedef struct kraft_syncer:
        int efd
        int started
    int kraft_syncer_start(kraft_syncer *s)
    int kraft_syncer_submit(kraft_syncer *s, int fd) nogil
    int kraft_syncer_collect(kraft_syncer *s, int block, int *err, int64_t *ns) nogil
    void kraft_syncer_stop(kraft_syncer *s) nogil


cdef class Syncer:
    cdef kraft_syncer s
    cdef bint closed

    def __cinit__(self):
        cdef int rc = kraft_syncer_start(&self.s)
        if rc:
            raise OSError(rc, "cannot start the fdatasync thread")
        self.closed = False

    def fileno(self) -> int:
        """The eventfd that becomes readable when a job finishes."""
        return self.s.efd

    def submit(self, int fd) -> None:
        """fdatasync ``fd`` on the thread, then close it. Raises if a job is uncollected."""
        if self.closed:
            raise ValueError("syncer is closed")
        # The GIL stays held: the thread holds the mutex only for a few stores, and taking
        # the GIL back could wait behind another Python thread for a switch interval.
        cdef int rc = kraft_syncer_submit(&self.s, fd)
        if rc:
            raise RuntimeError("a sync is already running")

    def collect(self):
        """``(errno, seconds)`` of the finished job, or None if none has finished."""
        cdef int err = 0
        cdef int64_t ns = 0
        cdef int got = kraft_syncer_collect(&self.s, 0, &err, &ns)  # GIL held, as in submit
        return (err, ns / 1e9) if got else None

    def wait(self):
        """Block until the submitted job is done; its ``(errno, seconds)``, or None if there
        was no job."""
        cdef int err = 0
        cdef int64_t ns = 0
        cdef int got
        with nogil:
            got = kraft_syncer_collect(&self.s, 1, &err, &ns)
        return (err, ns / 1e9) if got else None

    def close(self) -> None:
        """Stop the thread after its current job. Idempotent."""
        if not self.closed:
            self.closed = True
            with nogil:
                kraft_syncer_stop(&self.s)

    def __dealloc__(self):
        if not self.closed:
            kraft_syncer_stop(&self.s)
