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
