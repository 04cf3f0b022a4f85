/**
 * The fan-out's sizes, in plain values (no AWS SDK): the stack sizes the poll
 * queue's room and the workers' concurrency from them (lib/ratchet.ts), the
 * dispatcher and the workers use them (fanout.ts), and the bench reports by them.
 */

/** Jobs per poll-queue message: one provider+key's, polled together by one worker. */
export const JOBS_PER_MESSAGE = 50;
/** Polls in flight at once in one worker invocation (the provider's answer is most of a poll's time). */
export const POLLS_AT_ONCE = 16;
