/**
 * The coalescer (engines/sql/coalescer.ts) that PostgreSQL's write lanes,
 * write statements and settles share: what arrives while a batch is on its
 * way goes in the next, in order, within its limits, and each caller hears
 * its own answer or its batch's failure. The batches here are sent to a
 * stand-in that records them and answers when the test says.
 */
import { describe, expect, it } from 'vitest';
import { Coalescer, type CoalescerOptions, Failed } from '../../engines/sql/coalescer.ts';

/** A batch sent and not yet answered: the test answers it (each item upper-cased) or fails it. */
interface Sent {
  items: string[];
  answer(answers?: Array<string | Failed>): void;
  fail(error: Error): void;
  early(item: string, answer: string): void;
}

const standIn = (options?: CoalescerOptions<string>) => {
  const sent: Sent[] = [];
  const coalescer = new Coalescer<string, string>(
    (items, early) =>
      new Promise((resolve, reject) => {
        sent.push({
          items,
          answer: (answers) => resolve(answers ?? items.map((item) => item.toUpperCase())),
          fail: reject,
          early: (item, answer) => early(item, answer),
        });
      }),
    options,
  );
  return { coalescer, sent };
};

/** Every promise callback queued so far has run. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Each caller's answer as it stands: the value, the error's message, or 'waiting'. */
const watch = (promises: Array<Promise<string>>) => {
  const states: string[] = promises.map(() => 'waiting');
  for (const [i, promise] of promises.entries())
    promise.then(
      (value) => {
        states[i] = value;
      },
      (error: Error) => {
        states[i] = `failed: ${error.message}`;
      },
    );
  return states;
};

describe('Coalescer', () => {
  it('sends an item at once, alone, when nothing is in flight', async () => {
    const { coalescer, sent } = standIn();
    const answer = coalescer.push('a');
    expect(sent.map((batch) => batch.items)).toEqual([['a']]);
    sent[0]?.answer();
    expect(await answer).toBe('A');
  });

  it('sends the items that came while a batch was in flight together in the next, in the order pushed', async () => {
    const { coalescer, sent } = standIn();
    const states = watch(['a', 'b', 'c', 'd'].map((item) => coalescer.push(item)));
    expect(sent.map((batch) => batch.items)).toEqual([['a']]);
    sent[0]?.answer();
    await settled();
    expect(sent.map((batch) => batch.items)).toEqual([['a'], ['b', 'c', 'd']]);
    expect(states).toEqual(['A', 'waiting', 'waiting', 'waiting']);
    sent[1]?.answer();
    await settled();
    expect(states).toEqual(['A', 'B', 'C', 'D']);
  });

  it('takes at most maxBatch items in a batch, the oldest first', async () => {
    const { coalescer, sent } = standIn({ maxBatch: 2 });
    const states = watch(['a', 'b', 'c', 'd', 'e', 'f'].map((item) => coalescer.push(item)));
    for (let i = 0; i < 4; i++) {
      sent[i]?.answer();
      await settled();
    }
    expect(sent.map((batch) => batch.items)).toEqual([['a'], ['b', 'c'], ['d', 'e'], ['f']]);
    expect(states).toEqual(['A', 'B', 'C', 'D', 'E', 'F']);
  });

  it('puts at most one item of a key in a batch; the later keeps its place ahead of those pushed after it', async () => {
    const { coalescer, sent } = standIn({ keyOf: (item) => item.slice(0, 1) });
    for (const item of ['x0', 'x1', 'y1', 'x2', 'z1']) void coalescer.push(item);
    sent[0]?.answer();
    await settled();
    sent[1]?.answer();
    await settled();
    expect(sent.map((batch) => batch.items)).toEqual([['x0'], ['x1', 'y1', 'z1'], ['x2']]);
  });

  it('keeps at most maxInFlight batches on their way', async () => {
    const { coalescer, sent } = standIn({ maxInFlight: 2 });
    for (const item of ['a', 'b', 'c', 'd']) void coalescer.push(item);
    expect(sent.map((batch) => batch.items)).toEqual([['a'], ['b']]);
    sent[1]?.answer();
    await settled();
    expect(sent.map((batch) => batch.items)).toEqual([['a'], ['b'], ['c', 'd']]);
  });

  it('answers a failed batch’s error to each of its callers, and sends the next batch as usual', async () => {
    const { coalescer, sent } = standIn();
    const states = watch(['a', 'b', 'c', 'd'].map((item) => coalescer.push(item)));
    sent[0]?.answer();
    await settled();
    sent[1]?.fail(new Error('refused'));
    const later = watch([coalescer.push('e')]);
    await settled();
    expect(states).toEqual(['A', 'failed: refused', 'failed: refused', 'failed: refused']);
    expect(sent.map((batch) => batch.items)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    sent[2]?.answer();
    await settled();
    expect(later).toEqual(['E']);
  });

  it('rejects one item alone when its answer is Failed', async () => {
    const { coalescer, sent } = standIn();
    void coalescer.push('a');
    const states = watch(['b', 'c'].map((item) => coalescer.push(item)));
    sent[0]?.answer();
    await settled();
    sent[1]?.answer(['B', new Failed(new Error('c alone'))]);
    await settled();
    expect(states).toEqual(['B', 'failed: c alone']);
  });

  it('answers an item early, before the rest of its batch, and keeps that answer', async () => {
    const { coalescer, sent } = standIn();
    void coalescer.push('a');
    const states = watch(['b', 'c'].map((item) => coalescer.push(item)));
    sent[0]?.answer();
    await settled();
    sent[1]?.early('c', 'c early');
    await settled();
    expect(states).toEqual(['waiting', 'c early']);
    sent[1]?.answer();
    await settled();
    expect(states).toEqual(['B', 'c early']);
  });

  it('fails every waiting item on failWaiting, not those in flight', async () => {
    const { coalescer, sent } = standIn();
    const states = watch(['a', 'b', 'c'].map((item) => coalescer.push(item)));
    coalescer.failWaiting(new Error('silent'));
    sent[0]?.answer();
    await settled();
    expect(states).toEqual(['A', 'failed: silent', 'failed: silent']);
    expect(sent).toHaveLength(1);
  });

  it('with gatherTurn, sends the items pushed together as one batch', async () => {
    const { coalescer, sent } = standIn({ gatherTurn: true });
    for (const item of ['a', 'b', 'c']) void coalescer.push(item);
    expect(sent).toHaveLength(0);
    await settled();
    expect(sent.map((batch) => batch.items)).toEqual([['a', 'b', 'c']]);
  });

  it('calls onIdle once the last batch is answered and nothing waits', async () => {
    let idle = 0;
    const { coalescer, sent } = standIn({ onIdle: () => idle++ });
    void coalescer.push('a');
    void coalescer.push('b');
    sent[0]?.answer();
    await settled();
    expect(idle).toBe(0);
    sent[1]?.answer();
    await settled();
    expect(idle).toBe(1);
  });
});
