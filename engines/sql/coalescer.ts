/**
 * Batches what arrives while a batch is on its way: each caller pushes one
 * item and gets a promise of its own answer; the items that come while the
 * coalescer has its most batches in flight wait, and go together in the next
 * batch. At rest an item goes at once, alone; under load one round trip
 * carries many. The PostgreSQL engine has three: an operation's lane of
 * events, the write statements, and the effects' settles.
 *
 * What it guarantees:
 * - Order: a batch holds its items in the order they were pushed, and takes
 *   the oldest waiting first; an item left out (the batch full, or its key
 *   already in it) keeps its place ahead of those pushed after it.
 * - At most `maxInFlight` batches on their way at once (default 1: each batch
 *   goes once the one before it is answered); at most `maxBatch` items in one,
 *   and, with `keyOf`, at most one item per key.
 * - Answers: `send` answers its batch's items in order. If it throws, each
 *   item of that batch is rejected with the error, and the next batch goes as
 *   usual. An answer `new Failed(error)` rejects that item alone. `send` may
 *   answer an item before the rest (`answer`): its caller need not wait for
 *   the others; the batch's later answer for it is then ignored.
 * - `failWaiting(error)` rejects every item not yet in a batch: after a
 *   failure that says the next batch would fail alike.
 */

/** An answer that rejects its item alone, the rest of the batch answered as usual. */
export class Failed {
  constructor(readonly error: unknown) {}
}

/** Answers one item of the batch now, before `send` returns. */
export type AnswerNow<Item, Answer> = (item: Item, answer: Answer | Failed) => void;

/** Sends one batch: one answer per item, in order. */
export type Send<Item, Answer> = (batch: Item[], answer: AnswerNow<Item, Answer>) => Promise<Array<Answer | Failed>>;

export interface CoalescerOptions<Item> {
  /** Batches on their way at once (default 1). */
  maxInFlight?: number;
  /** Items in one batch at most (default: every item waiting). */
  maxBatch?: number;
  /** Items of one key never share a batch: the later waits for a next one. */
  keyOf?: (item: Item) => string;
  /** An item that finds no batch in flight waits a turn (a microtask) first: items pushed together go together. */
  gatherTurn?: boolean;
  /** Called when a batch is answered and nothing else is waiting or in flight (e.g. to forget a coalescer kept per key). */
  onIdle?: () => void;
}

interface Pending<Item, Answer> {
  item: Item;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

export class Coalescer<Item, Answer> {
  private waiting: Array<Pending<Item, Answer>> = [];
  private inFlight = 0;
  private gathering = false;
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  constructor(
    private readonly send: Send<Item, Answer>,
    private readonly options: CoalescerOptions<Item> = {},
  ) {
    this.maxInFlight = options.maxInFlight ?? 1;
    this.maxBatch = options.maxBatch ?? Number.POSITIVE_INFINITY;
  }

  push(item: Item): Promise<Answer> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (this.options.gatherTurn && this.inFlight === 0) {
        if (this.gathering) return;
        this.gathering = true;
        queueMicrotask(() => {
          this.gathering = false;
          this.sendWaiting();
        });
      } else this.sendWaiting();
    });
  }

  /** Rejects every item still waiting (those in a batch are answered by it). */
  failWaiting(error: unknown): void {
    for (const pending of this.waiting.splice(0)) pending.reject(error);
  }

  private sendWaiting(): void {
    while (!this.gathering && this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch = this.take();
      this.inFlight++;
      void this.sendBatch(batch);
    }
  }

  /** The next batch: the oldest waiting items, up to `maxBatch`, one per key. */
  private take(): Array<Pending<Item, Answer>> {
    const { keyOf } = this.options;
    if (!keyOf) return this.waiting.splice(0, this.maxBatch);
    const keys = new Set<string>();
    const batch: Array<Pending<Item, Answer>> = [];
    const later: Array<Pending<Item, Answer>> = [];
    for (const pending of this.waiting) {
      const key = keyOf(pending.item);
      if (batch.length < this.maxBatch && !keys.has(key)) {
        keys.add(key);
        batch.push(pending);
      } else later.push(pending);
    }
    this.waiting = later;
    return batch;
  }

  private async sendBatch(batch: Array<Pending<Item, Answer>>): Promise<void> {
    const items = batch.map((pending) => pending.item);
    // A promise settles once: an item answered early keeps that answer.
    const settle = (pending: Pending<Item, Answer> | undefined, answer: Answer | Failed) =>
      answer instanceof Failed ? pending?.reject(answer.error) : pending?.resolve(answer);
    try {
      const answers = await this.send(items, (item, answer) => settle(batch[items.indexOf(item)], answer));
      for (const [i, pending] of batch.entries()) settle(pending, answers[i] as Answer | Failed);
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    }
    this.inFlight--;
    if (this.inFlight === 0 && this.waiting.length === 0) this.options.onIdle?.();
    else this.sendWaiting();
  }
}
