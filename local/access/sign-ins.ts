/** The console's sign-ins in this process (one machine, one process: the SQLite engine's home). */
import type { SignInStore } from '../../app/ports.ts';

export class MemorySignIns implements SignInStore {
  private readonly entries = new Map<string, { value: string; expiresAtMs: number }>();

  /** `clock`: the guard's own (its tests move it). */
  constructor(private readonly clock: () => number = Date.now) {}

  async put(key: string, value: string, expiresAtMs: number): Promise<void> {
    const now = this.clock();
    for (const [other, entry] of this.entries) if (entry.expiresAtMs <= now) this.entries.delete(other);
    this.entries.set(key, { value, expiresAtMs });
  }

  async get(key: string, nowMs: number): Promise<string | undefined> {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAtMs > nowMs) return entry.value;
    this.entries.delete(key);
    return undefined;
  }

  async take(key: string, nowMs: number): Promise<string | undefined> {
    const value = await this.get(key, nowMs);
    this.entries.delete(key);
    return value;
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }
}
