/**
 * Re-drive: puts dead-lettered transitions back on the effects queue, each
 * operation's in version order (the one that failed first, then those parked
 * behind it). Each letter is marked `redriving` before it is sent, so it no
 * longer holds later versions back; the handler removes it once delivered, and
 * a letter that fails again for the whole retry window is dead again.
 * `skip` drops one letter (the receiver will never take it) and re-drives the
 * rest of that operation.
 */
import type { DeadLetter, DeadLetters } from './dead-letters.ts';

export interface RedriveOptions {
  /** Only this operation's letters. */
  name?: string;
  /** `name#version` of a letter to drop instead of re-driving. */
  skip?: string;
}

export async function redrive(
  deadLetters: DeadLetters,
  send: (letter: DeadLetter) => Promise<void>,
  options: RedriveOptions = {},
): Promise<{ redriven: string[]; skipped: string[] }> {
  const skipped: string[] = [];
  const letters = (await deadLetters.list()).filter((letter) => !options.name || letter.name === options.name);
  const redriven: string[] = [];
  for (const letter of letters) {
    if (options.skip === letter.idempotencyKey) {
      await deadLetters.remove(letter.name, letter.version);
      skipped.push(letter.idempotencyKey);
      continue;
    }
    await deadLetters.markRedriving(letter.name, letter.version);
    await send(letter);
    redriven.push(letter.idempotencyKey);
  }
  return { redriven, skipped };
}

/** An undecodable record set aside by the effects handler, as the commands list it. */
export interface UndecodableLine {
  sequence: string;
  name: string | null;
  reason: string;
}

/** What `redrive --list` prints, one line per letter (the same for every engine). */
export function deadLetterLines(letters: DeadLetter[], undecodable: UndecodableLine[]): string[] {
  if (letters.length === 0 && undecodable.length === 0) return ['no dead letters'];
  return [
    ...letters.map(
      (l) =>
        `${l.idempotencyKey}  ${l.transition.previousState ?? '∅'} -> ${l.transition.state}  ${l.reason}  ${l.status}  attempts ${l.attempts}  ${l.lastError}`,
    ),
    ...undecodable.map((u) => `undecodable  stream record ${u.sequence}  ${u.name ?? '?'}  ${u.reason}`),
  ];
}

/** What a redrive prints: each skipped and re-queued letter, then the counts. */
export function redriveReportLines({ redriven, skipped }: { redriven: string[]; skipped: string[] }): string[] {
  return [
    ...skipped.map((key) => `skipped ${key}`),
    ...redriven.map((key) => `re-queued ${key}`),
    `${redriven.length} re-queued, ${skipped.length} skipped`,
  ];
}
