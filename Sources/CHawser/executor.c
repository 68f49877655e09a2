// The Swift runtime's global-executor hooks (see chawser_executor.h).
#include "CHawser.h"
#if defined(__linux__)
#include <dlfcn.h>
#include <time.h>

// The runtime's signatures (swift/Runtime/ConcurrencyHooks.def), with `Job *` as void *.
#define CHAWSER_SWIFTCC __attribute__((swiftcall))
typedef CHAWSER_SWIFTCC void (*enqueue_original)(void *job);
typedef CHAWSER_SWIFTCC void (*enqueue_delay_original)(unsigned long long delay_ns, void *job);
typedef CHAWSER_SWIFTCC void (*enqueue_deadline_original)(long long sec, long long nsec, long long tsec,
                                                          long long tnsec, int clock, void *job);
typedef CHAWSER_SWIFTCC void (*enqueue_hook)(void *job, enqueue_original original);
typedef CHAWSER_SWIFTCC void (*enqueue_delay_hook)(unsigned long long delay_ns, void *job,
                                                   enqueue_delay_original original);
typedef CHAWSER_SWIFTCC void (*enqueue_deadline_hook)(long long sec, long long nsec, long long tsec,
                                                      long long tnsec, int clock, void *job,
                                                      enqueue_deadline_original original);

static CHawser_enqueue_job_fn chawser_enqueue;
static CHawser_enqueue_job_at_fn chawser_enqueue_at;

static CHAWSER_SWIFTCC void chawser_enqueue_hook(void *job, enqueue_original original) {
    (void)original;
    chawser_enqueue(job);
}

static CHAWSER_SWIFTCC void chawser_enqueue_delay_hook(unsigned long long delay_ns, void *job,
                                                       enqueue_delay_original original) {
    (void)original;
    chawser_enqueue_at(job, CHawser_monotonic_ns() + (uint64_t)delay_ns);
}

// The runtime's clock ids: 1 continuous (CLOCK_BOOTTIME on Linux), 2 suspending (CLOCK_MONOTONIC).
static CHAWSER_SWIFTCC void chawser_enqueue_deadline_hook(long long sec, long long nsec, long long tsec,
                                                          long long tnsec, int clock, void *job,
                                                          enqueue_deadline_original original) {
    if (clock != 1 && clock != 2) {
        original(sec, nsec, tsec, tnsec, clock, job);
        return;
    }
    // The tolerance (tsec, tnsec) is not used: the loop's timers fire at the deadline.
    long long deadline = sec * 1000000000LL + nsec;
    uint64_t mono = CHawser_monotonic_ns();
    if (clock == 1) {  // convert a CLOCK_BOOTTIME deadline into CLOCK_MONOTONIC time
        struct timespec now;
        clock_gettime(CLOCK_BOOTTIME, &now);
        long long boot = (long long)now.tv_sec * 1000000000LL + (long long)now.tv_nsec;
        chawser_enqueue_at(job, deadline > boot ? mono + (uint64_t)(deadline - boot) : mono);
    } else {
        chawser_enqueue_at(job, deadline > 0 ? (uint64_t)deadline : 0);
    }
}

// The hook variables, referenced weakly: the linker resolves them against the concurrency
// runtime whether it is a shared library (the dynamic loader binds them) or linked statically
// (the static hawser, which exports no symbol, so dlsym could not find them there). A runtime
// without them leaves the references null; dlsym is the fallback.
extern void *swift_task_enqueueGlobal_hook __attribute__((weak));
extern void *swift_task_enqueueGlobalWithDelay_hook __attribute__((weak));
extern void *swift_task_enqueueGlobalWithDeadline_hook __attribute__((weak));

static void **hook_slot(const char *name, void **linked) {
    return linked ? linked : (void **)dlsym(RTLD_DEFAULT, name);
}

int CHawser_install_global_executor_hooks(CHawser_enqueue_job_fn enqueue, CHawser_enqueue_job_at_fn enqueue_at) {
    void **global = hook_slot("swift_task_enqueueGlobal_hook", &swift_task_enqueueGlobal_hook);
    void **delay = hook_slot("swift_task_enqueueGlobalWithDelay_hook", &swift_task_enqueueGlobalWithDelay_hook);
    void **deadline = hook_slot("swift_task_enqueueGlobalWithDeadline_hook", &swift_task_enqueueGlobalWithDeadline_hook);
    if (!global || !delay || !deadline) return CHAWSER_EXECUTOR_NO_HOOKS;
    if (__atomic_load_n(global, __ATOMIC_ACQUIRE) || __atomic_load_n(delay, __ATOMIC_ACQUIRE)
        || __atomic_load_n(deadline, __ATOMIC_ACQUIRE)) {
        return CHAWSER_EXECUTOR_HOOK_TAKEN;
    }
    chawser_enqueue = enqueue;
    chawser_enqueue_at = enqueue_at;
    // Timed hooks first: a plain enqueue may start work at once, which may sleep.
    __atomic_store_n(deadline, (void *)(enqueue_deadline_hook)chawser_enqueue_deadline_hook, __ATOMIC_RELEASE);
    __atomic_store_n(delay, (void *)(enqueue_delay_hook)chawser_enqueue_delay_hook, __ATOMIC_RELEASE);
    __atomic_store_n(global, (void *)(enqueue_hook)chawser_enqueue_hook, __ATOMIC_RELEASE);
    return CHAWSER_EXECUTOR_INSTALLED;
}

int CHawser_global_enqueue_hook_is_set(void) {
    void **global = hook_slot("swift_task_enqueueGlobal_hook", &swift_task_enqueueGlobal_hook);
    if (!global) return -1;
    return __atomic_load_n(global, __ATOMIC_ACQUIRE) != 0;
}

static __thread void *chawser_current_loop_storage;

void *CHawser_current_loop(void) { return chawser_current_loop_storage; }
void CHawser_set_current_loop(void *loop) { chawser_current_loop_storage = loop; }

#endif
