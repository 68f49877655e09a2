// The Swift concurrency runtime's global-executor hooks, for EventLoopGroup.installAsGlobalExecutor.
//
// libswift_Concurrency exports one function pointer per hook (swift_task_enqueueGlobal_hook and
// the delayed and deadline variants). A hook is called with the Swift calling convention and
// receives the runtime's own implementation as its last argument. The hooks below live here,
// in C, so that the calling convention is exact (clang's swiftcall) and Swift sees only plain C
// callbacks: `enqueue(job)` and `enqueue_at(job, deadline_ns)`.
#ifndef CHAWSER_EXECUTOR_H
#define CHAWSER_EXECUTOR_H
#if defined(__linux__)
#include <stdint.h>

/// Runs a Swift job (an opaque `Job *`) somewhere soon.
typedef void (*CHawser_enqueue_job_fn)(void *job);
/// Runs a Swift job once CLOCK_MONOTONIC reaches `deadline_ns`.
typedef void (*CHawser_enqueue_job_at_fn)(void *job, uint64_t deadline_ns);

/// The result of CHawser_install_global_executor_hooks.
enum {
    CHAWSER_EXECUTOR_INSTALLED = 0,
    /// A global-enqueue hook (or a delayed or deadline one) was already set by someone else.
    CHAWSER_EXECUTOR_HOOK_TAKEN = 1,
    /// This Swift runtime does not export the hooks.
    CHAWSER_EXECUTOR_NO_HOOKS = 2,
};

/// Points the runtime's global-enqueue, delayed-enqueue and deadline-enqueue hooks at
/// `enqueue` / `enqueue_at` (a deadline on a clock other than the continuous and suspending
/// ones goes to the runtime's own implementation). Refuses (and changes nothing) when any of the three is already
/// set. Not thread-safe against itself: callers serialise it.
int CHawser_install_global_executor_hooks(CHawser_enqueue_job_fn enqueue, CHawser_enqueue_job_at_fn enqueue_at);

/// 1 when the runtime's global-enqueue hook is set (by anyone), 0 when not, -1 when the runtime
/// has no such hook.
int CHawser_global_enqueue_hook_is_set(void);

/// The event loop running on this thread (an unretained EventLoop), or NULL.
void *CHawser_current_loop(void);
/// Records the event loop running on this thread (called once, from the loop's thread).
void CHawser_set_current_loop(void *loop);

#endif /* __linux__ */
#endif
