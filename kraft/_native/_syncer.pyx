"""Syncer: a native thread that runs fdatasync for a log without ever taking the GIL.

A Python flusher thread takes the GIL after every fdatasync to report, and the event loop
then takes it back: at one write in flight that costs a handful of futex calls and context
switches per write on every node, and a report can wait behind the loop's Python code. Here
the loop hands over a file descriptor, the thread syncs it and closes it, records the
result, and writes to an eventfd that the loop watches. The loop does all bookkeeping;
this thread runs C only.

One job at a time (a log's flush cycles are serial). ``submit`` owns the descriptor it is
given (pass a dup). ``collect`` returns the finished job's ``(errno, seconds, sent)`` or None;
``wait`` blocks (GIL released) until the job is done, for closing.

A job may carry one send: ``attach(socket_fd, frame)`` while its fdatasync has not returned,
and the thread writes ``frame`` to that socket (non-blocking) right after a successful
fdatasync — a Raft follower's next Fetch, which may only leave once what it acknowledges is
durable. Waking the event loop to write it cost a thread wake-up (~55 µs median on a busy
2-core machine, 230 at p90) plus the loop's Python before the write, on the path of every
write. ``sent`` is the number of bytes written (the caller writes the rest in order), or -1
when nothing was written (no send, a failed fdatasync, or ``detach`` withdrew it).
"""

from libc.stdint cimport uint64_t, int64_t

cdef extern from *:
    """
    #include <errno.h>
    #include <pthread.h>
    #include <stdint.h>
    #include <string.h>
    #include <stdlib.h>
    #include <sys/eventfd.h>
    #include <sys/socket.h>
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
        int send_fd;           /* -1: no send attached to the job */
        char *send_buf;
        size_t send_len;
        int send_closed;       /* the fdatasync returned: attach and detach refuse */
        long result_sent;      /* bytes written, or -1 */
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

            /* Take the attached send (detach can no longer withdraw it); write it only
               if what it acknowledges is now durable. */
            pthread_mutex_lock(&s->mu);
            s->send_closed = 1;
            int sfd = s->send_fd;
            char *buf = s->send_buf;
            size_t len = s->send_len;
            s->send_fd = -1;
            s->send_buf = NULL;
            pthread_mutex_unlock(&s->mu);
            long sent = -1;
            if (sfd >= 0) {
                if (rc == 0) {
                    ssize_t w;
                    do w = send(sfd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                    while (w < 0 && errno == EINTR);
                    sent = w < 0 ? 0 : (long)w;  /* a refused write: the caller writes it all */
                }
                close(sfd);
                free(buf);
            }

            pthread_mutex_lock(&s->mu);
            s->result_sent = sent;
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
        s->send_fd = -1;
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
        s->send_closed = 0;
        s->result_sent = -1;
        s->job_fd = fd;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }

    /* 0 (the job owns sock and a copy of buf), or EBUSY: no job whose fdatasync is still
       running, or a send is attached already. */
    static int kraft_syncer_attach(kraft_syncer *s, int sock, const char *buf, size_t len) {
        char *copy = malloc(len ? len : 1);
        if (!copy) return ENOMEM;
        memcpy(copy, buf, len);
        pthread_mutex_lock(&s->mu);
        int ok = s->busy && !s->finished && !s->send_closed && s->send_fd < 0 && !s->stopping;
        if (ok) {
            s->send_fd = sock;
            s->send_buf = copy;
            s->send_len = len;
        }
        pthread_mutex_unlock(&s->mu);
        if (!ok) free(copy);
        return ok ? 0 : EBUSY;
    }

    /* 1 if an attached send was withdrawn before the thread took it (its socket closed). */
    static int kraft_syncer_detach(kraft_syncer *s) {
        pthread_mutex_lock(&s->mu);
        int sfd = s->send_fd;
        char *buf = s->send_buf;
        s->send_fd = -1;
        s->send_buf = NULL;
        pthread_mutex_unlock(&s->mu);
        if (sfd < 0) return 0;
        close(sfd);
        free(buf);
        return 1;
    }

    /* 1 with the result if the job finished (and forget it), else 0. The eventfd is
       drained first, every time: the thread writes it after publishing the result, so a
       write that lands after a blocking collect is drained by the next call instead of
       leaving the loop woken forever. */
    static int kraft_syncer_collect(kraft_syncer *s, int block, int *err, int64_t *ns, long *sent) {
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
            *sent = s->result_sent;
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
        if (s->send_fd >= 0) { close(s->send_fd); s->send_fd = -1; }
        free(s->send_buf);
        s->send_buf = NULL;
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
    int kraft_syncer_attach(kraft_syncer *s, int sock, const char *buf, size_t len)
    int kraft_syncer_detach(kraft_syncer *s)
    int kraft_syncer_collect(kraft_syncer *s, int block, int *err, int64_t *ns, long *sent) nogil
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

    def attach(self, int sock, const unsigned char[::1] frame) -> bool:
        """Write ``frame`` to socket ``sock`` once the running job's fdatasync succeeds.
        True: the job owns ``sock`` (pass a dup) and closes it. False (the fdatasync already
        returned, no job runs, or a send is attached): the caller keeps ``sock``."""
        if frame.shape[0] == 0:
            raise ValueError("nothing to send")
        if self.closed:
            return False
        return kraft_syncer_attach(&self.s, sock, <const char *>&frame[0], frame.shape[0]) == 0

    def detach(self) -> bool:
        """Withdraw the attached send unless the thread has taken it: True if withdrawn."""
        return kraft_syncer_detach(&self.s) == 1

    def collect(self):
        """``(errno, seconds, sent)`` of the finished job, or None if none has finished."""
        cdef int err = 0
        cdef int64_t ns = 0
        cdef long sent = -1
        cdef int got = kraft_syncer_collect(&self.s, 0, &err, &ns, &sent)  # GIL held, as in submit
        return (err, ns / 1e9, sent) if got else None

    def wait(self):
        """Block until the submitted job is done; its ``(errno, seconds, sent)``, or None if
        there was no job."""
        cdef int err = 0
        cdef int64_t ns = 0
        cdef long sent = -1
        cdef int got
        with nogil:
            got = kraft_syncer_collect(&self.s, 1, &err, &ns, &sent)
        return (err, ns / 1e9, sent) if got else None

    def close(self) -> None:
        """Stop the thread after its current job. Idempotent."""
        if not self.closed:
            self.closed = True
            with nogil:
                kraft_syncer_stop(&self.s)

    def __dealloc__(self):
        if not self.closed:
            kraft_syncer_stop(&self.s)
